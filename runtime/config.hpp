// vigil's configuration: typed structs loaded from YAML and validated before
// anything starts. config/vigil.yaml documents every field with unit and default;
// the defaults here and there must agree (a test checks it).
#pragma once

#include <cstdint>
#include <string>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"

namespace vigil {

enum class log_format { json, text };

struct log_config {
  log_format format = log_format::json;
  std::string level = "info"; ///< trace, debug, info, warn, error, critical, off
};

struct runtime_config {
  /// CAF scheduler workers; 0 = one per core (CAF's own default is at least 4).
  std::uint32_t scheduler_threads = 0;
  /// How long in-flight work may take to finish on SIGTERM before it is cancelled.
  std::uint32_t shutdown_grace_ms = 10000;
};

struct journal_config {
  /// "sqlite:PATH" or "postgresql://user:pass@host:port/db?sslmode=…".
  std::string url = "sqlite:vigil-journal.db";
  std::uint32_t batch_max_events = 512; ///< flush when this many appends wait
  /// … or when the oldest waited this long; 0 = group commit (write as soon
  /// as the writer is idle; appends arriving meanwhile form the next batch).
  std::uint32_t batch_max_delay_ms = 0;
  std::uint32_t queue_capacity = 65536; ///< appends waiting beyond this are refused
  std::uint32_t reconnect_initial_ms = 100;
  std::uint32_t reconnect_max_ms = 10000;
};

struct ingest_config {
  decode_limits limits; ///< bounds on one HealthEvent
  std::uint32_t max_body_bytes = 8 * 1024 * 1024;
};

struct vigil_config {
  log_config log;
  runtime_config runtime;
  journal_config journal;
  ingest_config ingest;
};

/// Parses YAML text. Unknown keys, wrong types and out-of-range values fail
/// with the key's path, e.g. "journal.batch_max_events: 0 is out of range [1, 1000000]".
expected<vigil_config> parse_config(const std::string& yaml_text);

/// Reads and parses a file; an unreadable file fails with its name.
expected<vigil_config> load_config_file(const std::string& path);

} // namespace vigil
