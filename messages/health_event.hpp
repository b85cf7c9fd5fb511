// The HealthEvent: the one contract between detectors and the control plane
// (ARCHITECTURE.md §2). Its JSON form follows NVSentinel's HealthEvent
// (protobuf JSON mapping, camelCase) so NVSentinel monitors can feed vigil.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil {

/// NVSentinel's RecommendedAction; the numbers are its protobuf values.
enum class recommended_action {
  none = 0,
  component_reset = 2,
  contact_support = 5,
  run_fielddiag = 6,
  restart_vm = 15,
  restart_bm = 24,
  replace_vm = 25,
  run_dcgmeud = 26,
  custom = 27,
  unknown = 99,
};

/// "COMPONENT_RESET" for component_reset, and so on.
std::string_view to_string(recommended_action action);
/// Accepts the name ("RESTART_BM") or NVSentinel's number as text ("24").
std::optional<recommended_action> parse_recommended_action(std::string_view text);
std::optional<recommended_action> recommended_action_from_number(long long number);

/// What the control plane may do with an event (NVSentinel ADR-025).
enum class processing_strategy {
  execute_remediation, ///< journal, quarantine, drain, remediate
  store_only,          ///< journal only: observability, no cluster change
  store_and_analyse,   ///< journal and feed correlation rules, no direct action
};

std::string_view to_string(processing_strategy strategy);
/// Accepts the name or NVSentinel's protobuf number, as a number or text:
/// 0 UNSPECIFIED (= EXECUTE_REMEDIATION), 1 EXECUTE_REMEDIATION, 2 STORE_ONLY,
/// 3 STORE_AND_ANALYSE.
std::optional<processing_strategy> parse_processing_strategy(std::string_view text);
std::optional<processing_strategy> processing_strategy_from_number(long long number);

/// One thing the event is about: ("GPU_UUID", "GPU-455d…"), ("PCI", "0000:03:00"),
/// ("NIC", "mlx5_0"), ("NICPort", "mlx5_0/1").
struct entity {
  std::string type;
  std::string value;

  friend bool operator==(const entity& a, const entity& b) {
    return a.type == b.type && a.value == b.value;
  }
  friend bool operator<(const entity& a, const entity& b) {
    return a.type != b.type ? a.type < b.type : a.value < b.value;
  }
};

/// Per-event override of a stage: force it even where rules say no, or skip it.
struct stage_override {
  bool force = false;
  bool skip = false;

  friend bool operator==(const stage_override& a, const stage_override& b) {
    return a.force == b.force && a.skip == b.skip;
  }
};

struct health_event {
  std::string id;              ///< stable idempotency key; may be empty before ingest
  std::string agent;           ///< the detector, e.g. "syslog-health-monitor"
  std::string component_class; ///< "GPU", "NIC", …
  std::string check_name;      ///< "SysLogsXIDError", "NICLinkState", …
  bool is_fatal = false;
  bool is_healthy = false;
  std::string message;
  recommended_action action = recommended_action::none;
  /// With action CUSTOM: the name of the custom remediation
  /// (NVSentinel's customRecommendedAction); "" otherwise.
  std::string custom_action;
  std::vector<std::string> error_codes;
  std::vector<entity> entities;
  std::map<std::string, std::string> metadata;
  std::optional<wall_time> generated;
  std::string node_name;
  std::optional<stage_override> quarantine_overrides;
  std::optional<stage_override> drain_overrides;
  processing_strategy strategy = processing_strategy::execute_remediation;

  friend bool operator==(const health_event& a, const health_event& b);
  friend bool operator!=(const health_event& a, const health_event& b) {
    return !(a == b);
  }
};

/// Whether the healthy event `healthy` clears an active record of its node
/// raised by (agent, check) for entity `subject` with `codes` (seed 000 §2.2,
/// NVSentinel's scoped recovery): the same agent and check; the subject among
/// the entities it names, or any when it names none; and when it names error
/// codes (a cancellation, or a counter that recovered), one of the record's
/// codes among them — with none, every code of the entity is cleared.
bool healthy_event_clears(const health_event& healthy, std::string_view agent,
                          std::string_view check, const entity& subject,
                          const std::vector<std::string>& codes);

/// Bounds on untrusted input; the ingest endpoint takes them from config.
struct decode_limits {
  size_t max_event_bytes = 65536;  ///< whole JSON document
  size_t max_message_bytes = 4096; ///< the `message` field
  size_t max_string_bytes = 1024;  ///< every other string value
  size_t max_entities = 64;
  size_t max_error_codes = 64;
  size_t max_metadata_entries = 64;
};

/// Parses and validates one HealthEvent JSON document. Keys match in
/// camelCase, snake_case or all-lowercase (NVSentinel's MongoDB form), so
/// "nodeName", "node_name" and "nodename" are the same field. The failure
/// names the field and the problem: missing nodeName, wrong type, unknown
/// action, over a size limit, duplicate keys, unknown fields.
expected<health_event> decode_health_event(std::string_view json,
                                           const decode_limits& limits = {});

/// The event cut down to what decode_health_event accepts under `limits`, so
/// that an agent never sends what ingest must refuse: strings cut at a UTF-8
/// character boundary and ended with "…", lists and metadata cut to their
/// counts, then metadata dropped from the end (and the message cut further)
/// until the encoding fits max_event_bytes. An event within the limits is
/// returned unchanged.
health_event fit_to_limits(health_event event, const decode_limits& limits = {});

/// Compact camelCase JSON; recommendedAction written as its name, the
/// timestamp in RFC 3339. decode(encode(e)) == e for every valid e.
std::string encode_health_event(const health_event& event);

} // namespace vigil
