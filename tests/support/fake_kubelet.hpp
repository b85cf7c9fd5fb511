// A real gRPC PodResources v1 server on a unix socket in a temp directory, from
// the same generated code the agent uses: the kubelet's side of the API, with
// the answers a test sets. Without `serves_get` it leaves Get to gRPC's
// default, UNIMPLEMENTED, as kubelets before 1.27 do.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "actors/agent/podresources/podresources_v1.grpc.pb.h"

namespace vigil::test {

class fake_kubelet_service : public v1::PodResourcesLister::Service {
public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    *out = list_;
    ++list_calls_;
    return grpc::Status::OK;
  }
  grpc::Status GetAllocatableResources(grpc::ServerContext*,
                                       const v1::AllocatableResourcesRequest*,
                                       v1::AllocatableResourcesResponse* out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    *out = allocatable_;
    return grpc::Status::OK;
  }
  void set_list(v1::ListPodResourcesResponse list) {
    std::lock_guard<std::mutex> lock(mutex_);
    list_ = std::move(list);
  }
  void set_allocatable(v1::AllocatableResourcesResponse answer) {
    std::lock_guard<std::mutex> lock(mutex_);
    allocatable_ = std::move(answer);
  }
  int list_calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return list_calls_;
  }

protected:
  std::mutex mutex_; // gRPC answers on its own threads
  v1::ListPodResourcesResponse list_;
  v1::AllocatableResourcesResponse allocatable_;
  int list_calls_ = 0;
};

/// A kubelet of 1.27 or later: Get answers from the List it was given.
class fake_kubelet_service_with_get : public fake_kubelet_service {
public:
  grpc::Status Get(grpc::ServerContext*, const v1::GetPodResourcesRequest* request,
                   v1::GetPodResourcesResponse* out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& pod : list_.pod_resources())
      if (pod.name() == request->pod_name()
          && pod.namespace_() == request->pod_namespace()) {
        *out->mutable_pod_resources() = pod;
        return grpc::Status::OK;
      }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "pod not found");
  }
};

/// Serves `service` on unix:<socket_path> until destroyed.
class fake_kubelet {
public:
  fake_kubelet(std::string socket_path, fake_kubelet_service& service)
    : socket_path_(std::move(socket_path)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_path_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
  }
  ~fake_kubelet() {
    if (server_)
      server_->Shutdown();
  }
  bool running() const { return server_ != nullptr; }
  const std::string& socket_path() const { return socket_path_; }

private:
  std::string socket_path_;
  std::unique_ptr<grpc::Server> server_;
};

/// One container's devices of one resource, for building List answers.
inline void add_container_devices(v1::ListPodResourcesResponse& list,
                                  const std::string& ns, const std::string& pod,
                                  const std::string& container,
                                  const std::string& resource,
                                  std::initializer_list<const char*> device_ids) {
  v1::PodResources* p = nullptr;
  for (auto& existing : *list.mutable_pod_resources())
    if (existing.name() == pod && existing.namespace_() == ns)
      p = &existing;
  if (p == nullptr) {
    p = list.add_pod_resources();
    p->set_name(pod);
    p->set_namespace_(ns);
  }
  v1::ContainerResources* c = nullptr;
  for (auto& existing : *p->mutable_containers())
    if (existing.name() == container)
      c = &existing;
  if (c == nullptr) {
    c = p->add_containers();
    c->set_name(container);
  }
  auto* devices = c->add_devices();
  devices->set_resource_name(resource);
  for (const char* id : device_ids)
    devices->add_device_ids(id);
}

} // namespace vigil::test
