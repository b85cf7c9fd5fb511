#include "actors/agent/forwarder/forwarder_logic.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include <nlohmann/json.hpp>

namespace vigil::agent {

namespace {

__extension__ typedef unsigned __int128 uint128;

// FNV-1a, 128-bit: offset basis and prime from the FNV specification.
class fnv1a_128 {
public:
  void add(std::string_view text) {
    for (unsigned char c : text) {
      hash_ ^= c;
      hash_ *= prime();
    }
    add_separator();
  }

  std::string hex() const {
    static const char digits[] = "0123456789abcdef";
    std::string out(32, '0');
    uint128 h = hash_;
    for (int i = 31; i >= 0; --i, h >>= 4)
      out[static_cast<std::size_t>(i)] = digits[static_cast<unsigned>(h & 0xF)];
    return out;
  }

private:
  static uint128 prime() { return (uint128{1} << 88) | 0x13B; }
  void add_separator() {
    hash_ ^= 0x1F; // unit separator: "ab"+"c" and "a"+"bc" differ
    hash_ *= prime();
  }

  uint128 hash_ = (uint128{0x6c62272e07bb0142ULL} << 64) | 0x62b821756295c58dULL;
};

// The "id" of an encoded event; the forwarder wrote it, so it is there.
std::string id_of(const std::string& encoded) {
  auto j = nlohmann::json::parse(encoded, nullptr, false);
  if (j.is_object())
    if (auto id = j.find("id"); id != j.end() && id->is_string())
      return id->get<std::string>();
  return "";
}

} // namespace

std::string derive_event_id(const health_event& e) {
  fnv1a_128 h;
  for (const auto* field : {&e.node_name, &e.agent, &e.component_class, &e.check_name})
    h.add(*field);
  h.add(e.is_fatal ? "fatal" : "non-fatal");
  h.add(e.is_healthy ? "healthy" : "unhealthy");
  for (const auto& code : e.error_codes)
    h.add(code);
  auto entities = e.entities;
  std::sort(entities.begin(), entities.end());
  for (const auto& entity : entities) {
    h.add(entity.type);
    h.add(entity.value);
  }
  h.add(e.generated ? format_rfc3339(*e.generated) : "");
  return h.hex();
}

std::chrono::milliseconds backoff_delay(const forwarder_options& options,
                                        unsigned attempt, double unit) {
  const double cap = static_cast<double>(options.backoff_max.count());
  double delay = static_cast<double>(options.backoff_initial.count())
                 * std::pow(options.backoff_multiplier, attempt > 0 ? attempt - 1 : 0);
  delay = std::min(delay, cap);
  delay *= 1.0 - options.jitter + 2.0 * options.jitter * unit;
  return std::chrono::milliseconds{static_cast<std::int64_t>(std::min(delay, cap))};
}

std::chrono::milliseconds retry_delay(const forwarder_options& options, unsigned attempt,
                                      post_failure failure,
                                      std::optional<std::chrono::seconds> retry_after,
                                      double unit) {
  if (!retry_after)
    return backoff_delay(options, attempt, unit);
  const auto asked =
    std::min<std::chrono::milliseconds>(*retry_after, options.retry_after_max);
  if (failure != post_failure::overloaded)
    return std::max(backoff_delay(options, attempt, unit), asked);
  const double spread = 1.0 + options.jitter * unit;
  return std::chrono::milliseconds{
    static_cast<std::int64_t>(static_cast<double>(asked.count()) * spread)};
}

forwarder_logic::forwarder_logic(forwarder_options options, event_spool& spool,
                                 jitter_source jitter)
  : options_(std::move(options)), spool_(spool), jitter_(std::move(jitter)),
    spool_mode_(!spool.empty()),
    batch_limit_(std::max<std::size_t>(1, options_.batch_max_events)) {
  if (!jitter_)
    jitter_ = [engine = std::mt19937{std::random_device{}()}]() mutable {
      return std::uniform_real_distribution<double>{0.0, 1.0}(engine);
    };
}

submit_result forwarder_logic::submit(health_event event, steady_time now) {
  ++stats_.submitted;
  if (event.id.empty())
    event.id = derive_event_id(event);
  // Within ingest's limits, so a long message (fifty GPUs' fabric faults)
  // never makes the control plane refuse the event.
  event = fit_to_limits(std::move(event));
  queued_event queued{event.id, encode_health_event(event), event.is_fatal, now};
  if (spool_mode_)
    return spool_one(std::move(queued));
  submit_result result{submit_status::queued, queued.id, 0, std::nullopt};
  memory_bytes_ += queued.line.size() + 1;
  memory_.push_back(std::move(queued));
  if (memory_.size() > options_.memory_max_events) {
    spool_mode_ = true;
    auto problems = spill_to_spool({});
    if (!problems.empty())
      result.error = problems.front();
  }
  return result;
}

// In spool mode: to disk; when the disk fails, memory holds it instead.
submit_result forwarder_logic::spool_one(queued_event event) {
  auto appended = spool_.append({event.line, event.fatal});
  stats_.spool_dropped += appended.dropped;
  submit_result result{submit_status::spooled, event.id, appended.dropped,
                       appended.error};
  switch (appended.status) {
    case spool_append_status::appended: return result;
    case spool_append_status::io_error:
      if (memory_.size() < options_.memory_max_events) {
        result.status = submit_status::queued;
        memory_bytes_ += event.line.size() + 1;
        memory_.push_back(std::move(event));
        return result;
      }
      break;
    case spool_append_status::refused_full:
      result.error = failure{spool_.file_path(), "spool full of fatal events"};
      break;
    case spool_append_status::too_large:
      result.error = failure{spool_.file_path(), "event larger than the spool"};
      break;
  }
  result.status = submit_status::refused;
  ++stats_.refused;
  return result;
}

// Moves `first`, then everything in memory, to the spool in order. What the
// spool does not take stays in memory, in order, and goes after the spool.
std::vector<failure> forwarder_logic::spill_to_spool(std::vector<queued_event> first) {
  first.insert(first.end(), std::make_move_iterator(memory_.begin()),
               std::make_move_iterator(memory_.end()));
  memory_.clear();
  memory_bytes_ = 0;
  std::vector<spool_entry> entries;
  for (const auto& e : first)
    entries.push_back({e.line, e.fatal});
  auto results = spool_.append_all(entries);
  std::vector<failure> problems;
  for (std::size_t i = 0; i < results.size(); ++i) {
    stats_.spool_dropped += results[i].dropped;
    if (results[i].status == spool_append_status::appended)
      continue;
    problems.push_back(results[i].error ? *results[i].error
                                        : failure{spool_.file_path(), "spool full"});
    memory_bytes_ += first[i].line.size() + 1;
    memory_.push_back(std::move(first[i]));
  }
  return problems;
}

std::optional<event_batch> forwarder_logic::next_batch(steady_time now) {
  if (in_flight_ || (retry_at_ && now < *retry_at_))
    return std::nullopt;
  if (spool_mode_ && !spool_.empty())
    return batch_from_spool(now);
  spool_mode_ = false;
  if (memory_.empty() || !memory_batch_due(now))
    return std::nullopt;
  return batch_from_memory();
}

bool forwarder_logic::memory_batch_due(steady_time now) const {
  return memory_.size() >= batch_limit_ || memory_bytes_ >= options_.batch_max_bytes
         || now - memory_.front().at >= options_.batch_max_delay
         || consecutive_failures_ > 0;
}

std::optional<event_batch> forwarder_logic::batch_from_spool(steady_time now) {
  auto events = spool_.peek(batch_limit_);
  if (!events || events->empty()) {
    // Unreadable spool: back off as if the send had failed.
    ++consecutive_failures_;
    retry_at_ = now + backoff_delay(options_, consecutive_failures_, jitter_());
    return std::nullopt;
  }
  std::vector<std::string> lines;
  std::vector<std::string> ids;
  std::size_t bytes = 0;
  std::uint64_t last_id = 0;
  for (auto& e : *events) {
    if (!lines.empty() && bytes + e.encoded.size() + 1 > options_.batch_max_bytes)
      break;
    bytes += e.encoded.size() + 1;
    last_id = e.id;
    ids.push_back(id_of(e.encoded));
    lines.push_back(std::move(e.encoded));
  }
  auto batch = start_flight(std::move(lines), std::move(ids), true);
  in_flight_->spool_last_id = last_id;
  return batch;
}

event_batch forwarder_logic::batch_from_memory() {
  std::vector<queued_event> taken;
  std::size_t bytes = 0;
  while (!memory_.empty() && taken.size() < batch_limit_) {
    const auto size = memory_.front().line.size() + 1;
    if (!taken.empty() && bytes + size > options_.batch_max_bytes)
      break;
    bytes += size;
    memory_bytes_ -= size;
    taken.push_back(std::move(memory_.front()));
    memory_.pop_front();
  }
  std::vector<std::string> lines;
  std::vector<std::string> ids;
  for (const auto& e : taken) {
    lines.push_back(e.line);
    ids.push_back(e.id);
  }
  auto batch = start_flight(std::move(lines), std::move(ids), false);
  in_flight_->events = std::move(taken);
  return batch;
}

event_batch forwarder_logic::start_flight(std::vector<std::string> lines,
                                          std::vector<std::string> ids, bool from_spool) {
  event_batch batch;
  batch.number = next_batch_number_++;
  for (const auto& line : lines) {
    batch.body += line;
    batch.body += '\n';
  }
  batch.ids = std::move(ids);
  batch.from_spool = from_spool;
  in_flight_ = flight{batch, std::move(lines), {}, 0};
  ++stats_.batches_sent;
  return batch;
}

batch_report forwarder_logic::complete(const post_result& result, steady_time now) {
  batch_report report;
  if (!in_flight_)
    return report;
  const bool verdict_per_line = result.lines.size() == in_flight_->batch.ids.size();
  if (result.outcome == post_outcome::accepted
      || (result.outcome == post_outcome::rejected && verdict_per_line)) {
    finish(result, report);
  } else {
    // No verdict on these events (or not one per line): keep every one.
    auto retry = result;
    if (retry.outcome == post_outcome::rejected)
      retry.failure_class = post_failure::endpoint;
    schedule_retry(retry, now, report);
  }
  in_flight_.reset();
  return report;
}

// The batch is done: accepted, or rejected line by line (those lines are dropped).
void forwarder_logic::finish(const post_result& result, batch_report& report) {
  const auto& ids = in_flight_->batch.ids;
  const bool verdict_per_line = result.lines.size() == ids.size();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!verdict_per_line || result.lines[i].accepted) {
      ++report.accepted;
      continue;
    }
    report.rejected.push_back(
      rejected_event{ids[i], result.lines[i].error, in_flight_->lines[i]});
  }
  stats_.events_accepted += report.accepted;
  stats_.events_rejected += report.rejected.size();
  consecutive_failures_ = 0;
  retry_at_.reset();
  if (in_flight_->batch.from_spool)
    if (auto st = spool_.pop_through(in_flight_->spool_last_id); !st)
      report.spool_errors.push_back(st.error());
}

void forwarder_logic::schedule_retry(const post_result& result, steady_time now,
                                     batch_report& report) {
  ++stats_.failures;
  ++stats_.failures_by.at(static_cast<std::size_t>(result.failure_class));
  report.failure_class = result.failure_class;
  if (result.failure_class == post_failure::too_large)
    batch_limit_ = std::max<std::size_t>(1, in_flight_->batch.ids.size() / 2);
  ++consecutive_failures_;
  retry_at_ = now
              + retry_delay(options_, consecutive_failures_, result.failure_class,
                            result.retry_after, jitter_());
  report.retry_at = retry_at_;
  if (!in_flight_->batch.from_spool) {
    // The control plane is away: the batch and everything queued go to disk.
    spool_mode_ = true;
    report.spool_errors = spill_to_spool(std::move(in_flight_->events));
  }
}

std::optional<steady_time> forwarder_logic::next_wakeup(steady_time now) const {
  if (in_flight_)
    return std::nullopt;
  if (retry_at_ && *retry_at_ > now && (!spool_.empty() || !memory_.empty()))
    return retry_at_;
  if (spool_mode_ && !spool_.empty())
    return now;
  if (memory_.empty())
    return std::nullopt;
  if (memory_batch_due(now))
    return now;
  return memory_.front().at + options_.batch_max_delay;
}

status forwarder_logic::spool_memory() {
  std::vector<queued_event> first;
  if (in_flight_)
    first = std::move(in_flight_->events); // a failed send must not spool them again
  auto problems = spill_to_spool(std::move(first));
  if (!problems.empty())
    return problems.front();
  return ok();
}

} // namespace vigil::agent
