// The Kubernetes API test server: a loopback HTTP/HTTPS server in front of
// object_store that answers like kube-apiserver for everything vigil uses
// (and enough discovery and Table output for kubectl get/describe/cordon).
// A test double and the simulated cluster of `vigil demo`; production always
// talks to a real API server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "messages/expected.hpp"
#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

struct test_server_options {
  bool tls = false;
  std::string cert_pem; ///< server certificate (TLS)
  std::string key_pem;
  std::string client_ca_pem; ///< when set, client certificates signed by it are accepted
  std::set<std::string> tokens; ///< accepted bearer tokens; empty = no authentication
  size_t watch_window = 10000;  ///< changes kept for watch resumption
  std::uint64_t fault_seed = 1; ///< the fault-injection dice
};

/// Injected faults, applied to every request except watches' streaming.
struct test_server_faults {
  std::chrono::milliseconds latency{0};
  double error_fraction = 0;    ///< answered 500 InternalError
  double throttle_fraction = 0; ///< answered 429 TooManyRequests with Retry-After
  int retry_after_seconds = 1;
  /// Writes to a Node (PUT, PATCH) that name the resourceVersion they were
  /// based on, answered 409 Conflict as when another writer (the kubelet, an
  /// operator) changed the node in between.
  double node_conflict_fraction = 0;
};

class kube_test_server {
public:
  /// Listens on 127.0.0.1 on a free port; fails when it cannot.
  static expected<std::unique_ptr<kube_test_server>> start(test_server_options options);
  ~kube_test_server();

  std::string url() const; ///< "https://127.0.0.1:PORT"
  std::uint16_t port() const;

  /// Runs `f(store)` under the server's lock and wakes watches afterwards.
  void with_store(const std::function<void(object_store&)>& f);

  void set_tokens(std::set<std::string> tokens);
  void set_faults(const test_server_faults& faults);
  /// Cuts every open watch connection mid-stream (no terminating chunk).
  void drop_watches();
  /// Forgets the watch history (every older resourceVersion becomes 410),
  /// and the next watch that resumes from a resourceVersion — even the
  /// current one — is answered 410 Expired, as after an etcd compaction
  /// that raced with the reconnect.
  void expire_history();
  /// Sends a BOOKMARK on every watch that asked for them.
  void send_bookmarks();

  /// Requests answered so far (watches count once), by verb, and all.
  std::uint64_t requests_served(const std::string& verb = {}) const;

  class impl;

private:
  explicit kube_test_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace vigil::kube
