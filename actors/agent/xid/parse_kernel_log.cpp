#include "actors/agent/xid/parse_kernel_log.hpp"

#include <istream>
#include <utility>

#include "actors/agent/xid/burst_grouper.hpp"
#include "actors/agent/xid/xid_events.hpp"
#include "actors/agent/xid/xid_parser.hpp"

namespace vigil::agent {

bool malformed_lines::add(std::string_view kind, std::string_view line) {
  auto it = counts_.find(kind);
  if (it != counts_.end()) {
    ++it->second;
    return false;
  }
  counts_.emplace(std::string(kind), 1);
  first_.emplace(std::string(kind), std::string(line));
  return true;
}

std::uint64_t malformed_lines::total() const {
  std::uint64_t sum = 0;
  for (const auto& [kind, n] : counts_)
    sum += n;
  return sum;
}

namespace {

/// Writes a closed burst's final count into the event already in `events`.
void apply_closed(std::vector<closed_burst>& closed, std::vector<health_event>& events,
                  const std::map<std::string, size_t>& index_by_id) {
  for (auto& c : closed) {
    auto it = index_by_id.find(c.event.id);
    if (it != index_by_id.end())
      events[it->second] = std::move(c.event);
  }
  closed.clear();
}

} // namespace

parse_result parse_kernel_log(std::istream& in, const parse_options& options) {
  parse_result result;
  auto& counters = result.counters;
  kernel_log_parser parser;
  xid_event_builder builder(options.catalog, {options.node_name, options.boot_id,
                                              options.strategy, options.burst_window});
  if (options.metadata)
    builder.learn_gpus(*options.metadata);
  burst_grouper grouper(options.burst_window);
  std::vector<closed_burst> closed;
  std::map<std::string, size_t> index_by_id;
  wall_time last_time = options.boot_time;
  std::size_t abandoned = 0;
  std::string raw;
  while (std::getline(in, raw)) {
    ++counters.lines;
    if (!raw.empty() && raw.back() == '\r')
      raw.pop_back();
    auto parsed = parser.parse(raw);
    if (parser.abandoned_fallen_off() != abandoned) {
      abandoned = parser.abandoned_fallen_off();
      counters.malformed.add("fallen_off_bus", raw);
    }
    if (!parsed.is_nvidia())
      continue;
    ++counters.nvidia_lines;
    if (const auto* bad = std::get_if<malformed_record>(&parsed.record)) {
      counters.malformed.add(bad->kind, raw);
      continue;
    }
    if (const auto* xid = std::get_if<xid_record>(&parsed.record);
        xid != nullptr && !xid->detail_problem.empty())
      counters.malformed.add(xid->detail_problem, raw);
    if (parsed.line.kernel_time_us) {
      last_time =
        options.boot_time + std::chrono::microseconds(*parsed.line.kernel_time_us);
    } else if (auto t =
                 syslog_wall_time(parsed.line.syslog_timestamp, options.syslog_year)) {
      last_time = *t;
    }
    auto event = builder.build(parsed, raw, last_time);
    if (!event)
      continue;
    ++counters.events_before_grouping;
    if (auto now = grouper.offer(std::move(*event), last_time, closed)) {
      if (!now->is_healthy)
        index_by_id[now->id] = result.events.size();
      result.events.push_back(std::move(*now));
    }
    apply_closed(closed, result.events, index_by_id);
  }
  grouper.close_all(closed);
  apply_closed(closed, result.events, index_by_id);
  return result;
}

} // namespace vigil::agent
