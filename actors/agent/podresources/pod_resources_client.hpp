// The kubelet's PodResources API v1 over its unix socket, with gRPC (Debian's
// libgrpc++). Blocking, each call under a deadline; for a detached actor.
// Failures name the socket and gRPC's status, e.g. "/var/lib/kubelet/
// pod-resources/kubelet.sock: List: UNAVAILABLE: failed to connect".
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "actors/agent/podresources/podresources_v1.pb.h"
#include "messages/expected.hpp"

namespace vigil::agent {

/// Where the kubelet serves PodResources unless told otherwise.
inline constexpr const char* default_pod_resources_socket =
  "/var/lib/kubelet/pod-resources/kubelet.sock";

class pod_resources_client {
public:
  explicit pod_resources_client(std::string socket_path,
                                std::chrono::milliseconds deadline = std::chrono::seconds{
                                  10});
  ~pod_resources_client();
  pod_resources_client(const pod_resources_client&) = delete;
  pod_resources_client& operator=(const pod_resources_client&) = delete;

  expected<v1::ListPodResourcesResponse> list();
  expected<v1::AllocatableResourcesResponse> allocatable();
  /// One pod. A kubelet without Get (before 1.27, or the feature gate off)
  /// answers UNIMPLEMENTED; get_supported() is false from then on.
  expected<v1::GetPodResourcesResponse> get(const std::string& ns,
                                            const std::string& pod);
  bool get_supported() const { return get_supported_; }

  const std::string& socket_path() const { return socket_path_; }

private:
  struct channel;
  void connect();
  std::string socket_path_;
  std::chrono::milliseconds deadline_;
  std::unique_ptr<channel> channel_;
  bool get_supported_ = true;
};

} // namespace vigil::agent
