#include "actors/agent/podresources/pod_resources_client.hpp"

#include <grpcpp/grpcpp.h>

#include "actors/agent/podresources/podresources_v1.grpc.pb.h"

namespace vigil::agent {

namespace {

std::string_view code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    default: return "ERROR";
  }
}

// One unary call under the deadline; a failure names the socket, the call
// and gRPC's status.
template <class Response, class Call>
expected<Response> call(const std::string& socket, std::chrono::milliseconds deadline,
                        const char* name, bool& unavailable, Call&& invoke) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  Response response;
  const grpc::Status status = invoke(context, response);
  unavailable = status.error_code() == grpc::StatusCode::UNAVAILABLE;
  if (!status.ok())
    return failure{
      socket, std::string(name) + ": " + std::string(code_name(status.error_code()))
                + (status.error_message().empty() ? "" : ": " + status.error_message())};
  return response;
}

} // namespace

struct pod_resources_client::channel {
  std::shared_ptr<grpc::Channel> grpc_channel;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

pod_resources_client::pod_resources_client(std::string socket_path,
                                           std::chrono::milliseconds deadline)
  : socket_path_(std::move(socket_path)), deadline_(deadline) {
  connect();
}

// A new channel: after UNAVAILABLE (the kubelet restarting, its socket not
// there yet) the next call connects at once instead of waiting out gRPC's
// reconnect backoff, which grows to two minutes.
void pod_resources_client::connect() {
  channel_ = std::make_unique<channel>();
  channel_->grpc_channel =
    grpc::CreateChannel("unix://" + socket_path_, grpc::InsecureChannelCredentials());
  channel_->stub = v1::PodResourcesLister::NewStub(channel_->grpc_channel);
}

pod_resources_client::~pod_resources_client() = default;

expected<v1::ListPodResourcesResponse> pod_resources_client::list() {
  bool unavailable = false;
  auto answer = call<v1::ListPodResourcesResponse>(
    socket_path_, deadline_, "List", unavailable,
    [&](grpc::ClientContext& c, auto& response) {
      return channel_->stub->List(&c, v1::ListPodResourcesRequest{}, &response);
    });
  if (unavailable)
    connect();
  return answer;
}

expected<v1::AllocatableResourcesResponse> pod_resources_client::allocatable() {
  bool unavailable = false;
  auto answer = call<v1::AllocatableResourcesResponse>(
    socket_path_, deadline_, "GetAllocatableResources", unavailable,
    [&](grpc::ClientContext& c, auto& response) {
      return channel_->stub->GetAllocatableResources(
        &c, v1::AllocatableResourcesRequest{}, &response);
    });
  if (unavailable)
    connect();
  return answer;
}

expected<v1::GetPodResourcesResponse> pod_resources_client::get(const std::string& ns,
                                                                const std::string& pod) {
  v1::GetPodResourcesRequest request;
  request.set_pod_namespace(ns);
  request.set_pod_name(pod);
  bool unimplemented = false;
  bool unavailable = false;
  auto answer = call<v1::GetPodResourcesResponse>(
    socket_path_, deadline_, "Get", unavailable,
    [&](grpc::ClientContext& c, auto& response) {
      auto status = channel_->stub->Get(&c, request, &response);
      unimplemented = status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
      return status;
    });
  if (unimplemented)
    get_supported_ = false;
  if (unavailable)
    connect();
  return answer;
}

} // namespace vigil::agent
