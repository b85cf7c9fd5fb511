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

// A line's own time: its kernel timestamp from the boot time, else its
// syslog timestamp, else the time of the line before it.
wall_time line_time(const kernel_log_line& line, const parse_options& options,
                    wall_time last) {
  if (line.kernel_time_us)
    return options.boot_time + std::chrono::microseconds(*line.kernel_time_us);
  if (auto t = syslog_wall_time(line.syslog_timestamp, options.syslog_year))
    return *t;
  return last;
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
    if (!parsed.is_nvidia()) {
      if (!options.nic_check)
        continue;
      const auto at = line_time(split_kernel_log_line(raw), options, last_time);
      auto nic = options.nic_check->event_for(raw, at, options.node_name, options.boot_id,
                                              options.sysfs_root);
      if (!nic)
        continue;
      ++counters.nic_driver_lines;
      ++counters.events_before_grouping;
      if (auto now = grouper.offer(std::move(*nic), at, closed)) {
        index_by_id[now->id] = result.events.size();
        result.events.push_back(std::move(*now));
      }
      apply_closed(closed, result.events, index_by_id);
      continue;
    }
    ++counters.nvidia_lines;
    if (const auto* bad = std::get_if<malformed_record>(&parsed.record)) {
      counters.malformed.add(bad->kind, raw);
      continue;
    }
    if (const auto* xid = std::get_if<xid_record>(&parsed.record);
        xid != nullptr && !xid->detail_problem.empty())
      counters.malformed.add(xid->detail_problem, raw);
    last_time = line_time(parsed.line, options, last_time);
    auto event = builder.build(parsed, raw, last_time);
    if (!event)
      continue;
    ++counters.events_before_grouping;
    auto cancelled = options.cancellations ? options.cancellations->cancelled_by(*event)
                                           : std::vector<health_event>{};
    auto offer = [&](health_event e) {
      if (auto now = grouper.offer(std::move(e), last_time, closed)) {
        if (!now->is_healthy)
          index_by_id[now->id] = result.events.size();
        result.events.push_back(std::move(*now));
      }
    };
    offer(std::move(*event));
    for (auto& e : cancelled)
      offer(std::move(e));
    apply_closed(closed, result.events, index_by_id);
  }
  grouper.close_all(closed);
  apply_closed(closed, result.events, index_by_id);
  return result;
}

} // namespace vigil::agent
