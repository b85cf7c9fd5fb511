// The API test server's REST surface called directly, for the virtual-time
// `vigil demo`: no sockets and no threads, so CAF's test coordinator can run
// the whole control plane on one thread and let hours pass in seconds.
// Requests are answered before send() returns; open watches receive every
// change as soon as a request or with_store() made it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/kube/kube_client.hpp"
#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

/// Single-threaded: the store, its clients and their handlers are used from
/// one thread only.
class in_process_api {
public:
  explicit in_process_api(std::size_t watch_window = 100000);

  /// A client of this store (it keeps the store alive).
  std::shared_ptr<kube_client> client() const;

  /// Runs `f` on the store (the simulated kubelet, operator, Job controller
  /// and the scenario use it), then delivers the changes to open watches.
  void with_store(const std::function<void(object_store&)>& f);

  /// Read-only access, for summaries.
  const object_store& store() const;

  /// Requests answered so far (watches count once).
  std::uint64_t requests_served() const;

  struct state;

private:
  std::shared_ptr<state> state_;
};

} // namespace vigil::kube
