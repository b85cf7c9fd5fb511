// Cancellation rules of the kernel-log monitor (NVIDIA NVSentinel's
// syslog-health-monitor has the same): an error code that supersedes earlier
// ones on the same entities is followed by a healthy event for each code it
// supersedes, carrying that code, so the control plane clears exactly those
// records (healthy_event_clears). The rules are config/xid_cancellations.csv.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"

namespace vigil::agent {

/// Metadata key of a cancellation: the code that superseded the record.
inline constexpr std::string_view cancel_source_key = "cancelSourceErrorCode";

class xid_cancellations {
public:
  /// Reads the CSV (a header, `#` comments, then check,on_error_code,
  /// cancel_error_codes with the codes space-separated). Refused, naming the
  /// line: a missing or blank field, a code with spaces, no codes to cancel,
  /// a code cancelling itself or one listed twice, the same (check, code) on
  /// two lines.
  static expected<xid_cancellations> parse(std::string_view csv);
  /// `dir`/xid_cancellations.csv; the failure names the file.
  static expected<xid_cancellations> load(const std::string& dir);

  /// The healthy events that follow `source`: one per code its (check, first
  /// error code) cancels, with the source's agent, component, node, strategy
  /// and entities; none for a healthy source or a code with no rule.
  std::vector<health_event> cancelled_by(const health_event& source) const;

  bool empty() const { return rules_.empty(); }
  std::size_t size() const { return rules_.size(); }

private:
  /// (check, code) → the codes it cancels
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> rules_;
};

} // namespace vigil::agent
