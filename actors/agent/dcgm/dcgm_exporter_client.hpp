// Reads the node's dcgm-exporter page over HTTP (libcurl). Blocking: the
// dcgm_monitor actor that calls it runs detached.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "messages/expected.hpp"

namespace vigil::agent {

struct dcgm_exporter_options {
  /// dcgm-exporter's default port on the node (hostNetwork or a hostPort).
  std::string url = "http://localhost:9400/metrics";
  std::chrono::milliseconds timeout{5000};
  std::size_t max_page_bytes = 32 * 1024 * 1024; ///< a 72-GPU page is well under
};

/// Where a dcgm_monitor gets its pages from: the exporter, or a test's pages.
class metrics_page_source {
public:
  virtual ~metrics_page_source() = default;
  /// The page's text, or why it could not be read (names the URL).
  virtual expected<std::string> fetch() = 0;
};

class dcgm_exporter_client final : public metrics_page_source {
public:
  explicit dcgm_exporter_client(dcgm_exporter_options options);
  ~dcgm_exporter_client() override;
  dcgm_exporter_client(const dcgm_exporter_client&) = delete;
  dcgm_exporter_client& operator=(const dcgm_exporter_client&) = delete;

  /// GET url: a 200 reply's body; anything else fails with the status or
  /// curl's reason.
  expected<std::string> fetch() override;

private:
  dcgm_exporter_options options_;
  void* curl_ = nullptr; // CURL*, kept to reuse the connection
};

} // namespace vigil::agent
