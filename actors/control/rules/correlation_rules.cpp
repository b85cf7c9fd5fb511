#include "actors/control/rules/correlation_rules.hpp"

#include <algorithm>
#include <vector>

namespace vigil::control {

namespace {

template <class T>
std::string joined_sorted(std::vector<T> items) {
  std::sort(items.begin(), items.end());
  std::string out;
  for (const auto& item : items)
    out += item + ",";
  return out;
}

std::vector<std::string> entity_texts(const health_event& e) {
  std::vector<std::string> out;
  for (const auto& ent : e.entities)
    out.push_back(ent.type + "=" + ent.value);
  return out;
}

// Drops entries at or before `now - window` from a time-ordered sequence.
template <class Sequence, class TimeOf>
void drop_older(Sequence& items, wall_time now, std::chrono::seconds window,
                TimeOf time_of) {
  auto kept = std::find_if(items.begin(), items.end(), [&](const auto& item) {
    return time_of(item) > now - window;
  });
  items.erase(items.begin(), kept);
}

wall_time self(wall_time t) {
  return t;
}

} // namespace

event_deduplicator::event_deduplicator(correlation_config config)
  : config_(std::move(config)) {}

namespace {

std::string dedup_key(const health_event& e, bool healthy) {
  return e.node_name + "|" + e.agent + "|" + e.check_name + "|"
         + (healthy ? "healthy" : "unhealthy") + "|" + joined_sorted(entity_texts(e))
         + "|" + joined_sorted(e.error_codes);
}

} // namespace

std::string event_deduplicator::key_of(const health_event& e) {
  return dedup_key(e, e.is_healthy);
}

void event_deduplicator::prune(wall_time now) {
  while (!order_.empty() && order_.front().first <= now - config_.dedup_window) {
    auto i = last_.find(order_.front().second);
    if (i != last_.end() && i->second == order_.front().first)
      last_.erase(i);
    order_.pop_front();
  }
}

bool event_deduplicator::admit(const health_event& event, wall_time now) {
  prune(now);
  auto key = key_of(event);
  auto i = last_.find(key);
  if (i != last_.end() && now - i->second < config_.dedup_window)
    return false;
  last_[key] = now;
  order_.emplace_back(now, std::move(key));
  // A change of state ends the repeat: DOWN, UP, DOWN is three events.
  last_.erase(dedup_key(event, !event.is_healthy));
  return true;
}

gpu_xid_history::gpu_xid_history(correlation_config config)
  : config_(std::move(config)) {}

std::optional<recommended_action> gpu_xid_history::on_fatal_xid(wall_time now) {
  drop_older(bursts_, now, config_.xid_window, self);
  // A burst counts once: XIDs within xid_burst of its first one join it.
  if (bursts_.empty() || now - bursts_.back() >= config_.xid_burst)
    bursts_.push_back(now);
  if (bursts_.size() >= config_.xid_repeat_threshold)
    sticky_until_ = now + config_.xid_sticky;
  if (escalated(now))
    return recommended_action::contact_support;
  return std::nullopt;
}

nic_port_history::nic_port_history(correlation_config config)
  : config_(std::move(config)) {}

std::optional<nic_verdict> nic_port_history::on_link_downed(std::uint64_t delta,
                                                            wall_time now,
                                                            const std::string& check) {
  // One poll reports a DOWN twice: the port-state event (one) and the
  // degradation event (the counter's delta), both stamped with the poll's
  // time. The other check's report of the same instant is the same
  // link_downed events: only what exceeds the first counts. Reports without
  // the agent's timestamp (`check` empty) are never paired.
  const bool paired = !check.empty() && !last_report_check_.empty()
                      && check != last_report_check_ && last_report_at_ == now;
  if (paired) {
    const auto counted = last_report_delta_;
    last_report_delta_ = std::max(counted, delta);
    delta = delta > counted ? delta - counted : 0;
    last_report_check_.clear(); // a pair is complete
  } else {
    last_report_at_ = now;
    last_report_delta_ = delta;
    last_report_check_ = check;
  }
  if (delta == 0)
    return std::nullopt;
  delta_while_down_ = delta_while_down_ || down_since_.has_value();
  drop_older(link_downs_, now, config_.nic_flap_window, self);
  for (std::uint64_t i = 0; i < delta && link_downs_.size() < config_.nic_flap_threshold;
       ++i)
    link_downs_.push_back(now);
  // seed 002 §6.3: 3+ link_downed events within 10 minutes on one port.
  if (link_downs_.size() < config_.nic_flap_threshold)
    return std::nullopt;
  return nic_verdict{nic_verdict::kind::flapping, recommended_action::replace_vm,
                     std::to_string(link_downs_.size())
                       + " link_downed events within the flap window"};
}

void nic_port_history::on_state(bool up, wall_time now) {
  if (up) {
    down_since_.reset();
    delta_while_down_ = false;
    drop_reported_ = false;
  } else if (!down_since_) {
    down_since_ = now;
  }
}

std::optional<nic_verdict> nic_port_history::evaluate(wall_time now) {
  // seed 002 §6.2: DOWN for 4 min with no link_downed delta (no recovery tries).
  if (!down_since_ || drop_reported_ || delta_while_down_
      || now - *down_since_ < config_.nic_drop_after)
    return std::nullopt;
  drop_reported_ = true;
  return nic_verdict{nic_verdict::kind::dropped, config_.nic_drop_action,
                     "port DOWN with no link_downed delta for the drop window"};
}

std::optional<wall_time> nic_port_history::next_check() const {
  if (!down_since_ || drop_reported_ || delta_while_down_)
    return std::nullopt;
  return *down_since_ + config_.nic_drop_after;
}

remediation_history::remediation_history(correlation_config config)
  : config_(std::move(config)) {}

void remediation_history::prune(wall_time now) {
  drop_older(times_, now, config_.remediation_window, self);
}

std::optional<recommended_action> remediation_history::on_remediation(wall_time now) {
  prune(now);
  times_.push_back(now);
  if (times_.size() >= config_.remediation_repeat_threshold)
    return recommended_action::contact_support;
  return std::nullopt;
}

bool remediation_history::exhausted(wall_time now) {
  prune(now);
  return times_.size() + 1 >= config_.remediation_repeat_threshold;
}

std::size_t remediation_history::count(wall_time now) {
  prune(now);
  return times_.size();
}

fabric_correlator::fabric_correlator(correlation_config config)
  : config_(std::move(config)) {}

void fabric_correlator::prune(wall_time now) {
  drop_older(downs_, now, config_.fabric_window,
             [](const auto& entry) { return entry.first; });
  // The incident closes once no port went down for a whole window.
  if (incident_ && now - last_down_ >= config_.fabric_window)
    incident_.reset();
}

std::optional<fabric_incident> fabric_correlator::on_port_down(const std::string& node,
                                                               wall_time now) {
  prune(now);
  downs_.emplace_back(now, node);
  last_down_ = now;
  if (incident_) {
    auto added = incident_->nodes.insert(node).second;
    return added ? incident_ : std::nullopt;
  }
  std::set<std::string> nodes;
  for (const auto& entry : downs_)
    nodes.insert(entry.second);
  if (nodes.size() < config_.fabric_min_nodes)
    return std::nullopt;
  incident_ = fabric_incident{now, std::move(nodes)};
  return incident_;
}

bool fabric_correlator::suppresses(const std::string& node, wall_time now) {
  prune(now);
  return incident_ && incident_->nodes.count(node) != 0;
}

std::optional<fabric_incident> fabric_correlator::open_incident(wall_time now) {
  prune(now);
  return incident_;
}

namespace {

std::string entity_value(const health_event& e, const char* type) {
  for (const auto& ent : e.entities)
    if (ent.type == type)
      return ent.value;
  return {};
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size()
         && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The link_downed increase a NIC event reports: one for a port-state DOWN, the
// counter's delta for a degradation event on link_downed, else zero.
std::uint64_t link_downed_delta(const health_event& e) {
  if (is_nic_port_down(e))
    return 1;
  if (e.is_healthy || e.component_class != "NIC"
      || std::find(e.error_codes.begin(), e.error_codes.end(), "link_downed")
           == e.error_codes.end())
    return 0;
  auto number = [&](const char* key) -> std::uint64_t {
    auto i = e.metadata.find(key);
    if (i == e.metadata.end())
      return 0;
    try {
      return std::stoull(i->second);
    } catch (const std::exception&) {
      return 0;
    }
  };
  const auto previous = number("previous"), current = number("current");
  return current > previous ? current - previous : 1;
}

// An event of the drop rule: unhealthy unless the caller says otherwise.
health_event dropped_event(const std::string& node, std::vector<entity> entities,
                           wall_time at) {
  health_event e;
  e.agent = "vigil-correlation";
  e.component_class = "NIC";
  e.check_name = nic_port_dropped_check;
  e.is_fatal = true;
  e.entities = std::move(entities);
  e.node_name = node;
  e.generated = at;
  return e;
}

} // namespace

bool fabric_hold::take(health_event& event, std::int64_t seq, bool link_down,
                       wall_time now) {
  auto node = nodes_.find(event.node_name);
  if (node == nodes_.end() && (!link_down || hold_.count() <= 0))
    return false;
  auto& queue = nodes_[event.node_name];
  // Behind a held report an event waits only for that one: due at once.
  queue.push_back({std::move(event), seq, link_down ? now + hold_ : now});
  return true;
}

std::vector<fabric_hold::held> fabric_hold::release(const std::string& node,
                                                    wall_time now) {
  std::vector<held> out;
  auto it = nodes_.find(node);
  if (it == nodes_.end())
    return out;
  auto& queue = it->second;
  while (!queue.empty() && queue.front().due <= now) {
    out.push_back(std::move(queue.front()));
    queue.pop_front();
  }
  if (queue.empty())
    nodes_.erase(it);
  return out;
}

std::optional<wall_time> fabric_hold::next_due(const std::string& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.empty())
    return std::nullopt;
  return it->second.front().due;
}

std::size_t fabric_hold::drop(const std::string& node) {
  auto it = nodes_.find(node);
  if (it == nodes_.end())
    return 0;
  const auto n = it->second.size();
  nodes_.erase(it);
  return n;
}

std::size_t fabric_hold::size() const {
  std::size_t n = 0;
  for (const auto& [node, queue] : nodes_)
    n += queue.size();
  return n;
}

bool explained_by_fabric(const active_record& r) {
  // Either subject of a port-state event (NIC, NICPort) is a record.
  health_event as_event;
  as_event.component_class = r.component_class;
  as_event.check_name = r.check_name;
  as_event.entities = r.reported_with;
  as_event.entities.push_back(r.subject);
  as_event.error_codes = r.error_codes;
  return reports_link_down(as_event) || r.check_name == nic_port_dropped_check
         || r.check_name == nic_port_flapping_check;
}

namespace {

// The "device/port" an event or record names; "" when it names no port.
std::string port_key(const std::vector<entity>& entities) {
  std::string device, port;
  for (const auto& e : entities) {
    if (e.type == "NIC")
      device = e.value;
    else if (e.type == "NICPort")
      port = e.value;
  }
  return port.empty() ? std::string{} : device + "/" + port;
}

} // namespace

void fabric_ports::incident(const std::vector<active_record>& covered) {
  for (const auto& r : covered) {
    // Only a port reported down by its state check: a link_downed rise or a
    // flap verdict has no "up" to end it, and would keep the taint forever.
    if (r.component_class != "NIC" || !ends_with(r.check_name, "StateCheck"))
      continue;
    auto entities = r.reported_with;
    entities.push_back(r.subject);
    if (auto key = port_key(entities); !key.empty())
      ports_.insert(std::move(key));
  }
}

bool fabric_ports::observe(const health_event& e) {
  if (e.component_class != "NIC")
    return false;
  const auto key = port_key(e.entities);
  if (key.empty())
    return false;
  if (e.is_healthy)
    return ports_.erase(key) > 0;
  if (is_nic_port_down(e) && e.strategy == processing_strategy::store_and_analyse)
    return ports_.insert(key).second;
  return false;
}

bool reports_link_down(const health_event& e) {
  return link_downed_delta(e) > 0;
}

bool is_nic_port_down(const health_event& e) {
  return !e.is_healthy && e.component_class == "NIC"
         && ends_with(e.check_name, "StateCheck") && !entity_value(e, "NICPort").empty();
}

node_correlator::node_correlator(correlation_config config)
  : config_(config), dedup_(config) {}

namespace {

// A port-state event of a port that may act (not a fabric incident's
// analyse-only copy): it moves the port DOWN/UP for the drop rule.
bool moves_port_state(const health_event& e) {
  return e.component_class == "NIC" && ends_with(e.check_name, "StateCheck")
         && !entity_value(e, "NICPort").empty()
         && e.strategy == processing_strategy::execute_remediation;
}

} // namespace

correlation_subject subject_of(const health_event& e) {
  // A GPU by its UUID, or by its PCI address when the agent knew no UUID
  // (metadata not collected): its repeats still count, per PCI address.
  auto gpu = entity_value(e, "GPU_UUID");
  if (gpu.empty() && !entity_value(e, "PCI").empty())
    gpu = "PCI " + entity_value(e, "PCI");
  if (!e.is_healthy && e.is_fatal && e.component_class == "GPU" && !gpu.empty())
    return {correlation_subject::kind::gpu, gpu};
  if (link_downed_delta(e) > 0 || moves_port_state(e))
    return {correlation_subject::kind::nic_port,
            entity_value(e, "NIC") + "/" + entity_value(e, "NICPort")};
  return {};
}

correlation_outcome observe_gpu(gpu_xid_history& history, const std::string& uuid,
                                const health_event&, wall_time at) {
  correlation_outcome out;
  if (auto action = history.on_fatal_xid(at)) {
    out.escalate = action;
    out.rule = "repeated-xid";
    out.message = "GPU " + uuid + ": " + std::to_string(history.bursts())
                  + " bursts of fatal errors within the window; "
                  + std::string(to_string(*action));
  }
  return out;
}

void note_port_report(nic_port_report& report, const health_event& e, wall_time at) {
  auto take = [&](const char* key, std::string& into) {
    if (auto i = e.metadata.find(key); i != e.metadata.end() && !i->second.empty())
      into = i->second;
  };
  take("state", report.state);
  take("phys_state", report.phys_state);
  take("link_layer", report.link_layer);
  take("role", report.role);
  report.link_downed += link_downed_delta(e);
  report.at = at;
}

correlation_outcome observe_port(nic_port_history& history, const std::string& port,
                                 const health_event& e, wall_time at) {
  correlation_outcome out;
  // seed 002 §6.2 in event time: a port DOWN past the drop window before this
  // event was dropped then, whatever this event says (a link_downed rise
  // after the window does not undo a drop that happened).
  if (auto drop = due_drop(history, e.node_name, port, at))
    out.due.push_back(std::move(*drop));
  if (auto delta = link_downed_delta(e)) {
    if (auto verdict =
          history.on_link_downed(delta, at, e.generated ? e.check_name : std::string{})) {
      // seed 002 §6.3: a verdict about the port, not about this DOWN: a
      // record of its own, which the port's next UP does not clear (only a
      // reboot or a new node does). It acts only where the DOWN may act.
      out.rule = "nic-flap";
      out.message = "NIC port " + port + ": " + verdict->message;
      auto flapping = dropped_event(e.node_name, e.entities, at);
      flapping.check_name = nic_port_flapping_check;
      flapping.id = e.id + "-" + nic_port_flapping_check;
      flapping.action = verdict->action;
      flapping.message = out.message;
      flapping.strategy = e.strategy;
      out.derived.push_back(std::move(flapping));
    }
  }
  // Port-state events move the port DOWN/UP for the drop rule (after the
  // delta above: the DOWN itself is not a recovery attempt). Analyse-only
  // events (a fabric incident's) do not: the fabric explains them.
  if (moves_port_state(e)) {
    if (e.is_healthy && history.drop_reported()) {
      auto back = dropped_event(e.node_name, e.entities, at);
      back.id = e.id + "-" + nic_port_dropped_check;
      back.is_healthy = true;
      back.is_fatal = false;
      back.action = recommended_action::none;
      back.message = "NIC port " + port + " is back up";
      out.derived.push_back(std::move(back));
    }
    history.on_state(e.is_healthy, at);
  }
  return out;
}

std::vector<health_event> events_in_order(const health_event& event,
                                          correlation_outcome outcome) {
  auto out = std::move(outcome.due);
  out.push_back(event);
  if (outcome.escalate && !event.is_healthy) {
    auto& escalated = out.back();
    escalated.action = *outcome.escalate;
    escalated.message = outcome.message + " (" + event.message + ")";
  }
  for (auto& derived : outcome.derived)
    out.push_back(std::move(derived));
  return out;
}

std::optional<health_event> due_drop(nic_port_history& history, const std::string& node,
                                     const std::string& port, wall_time now) {
  const auto deadline = history.next_check();
  auto verdict = history.evaluate(now);
  if (!verdict || !deadline)
    return std::nullopt;
  const auto slash = port.rfind('/');
  auto e = dropped_event(
    node, {{"NIC", port.substr(0, slash)}, {"NICPort", port.substr(slash + 1)}},
    *deadline);
  e.id = node + "-" + port + "-" + nic_port_dropped_check + "-"
         + std::to_string(unix_seconds(*deadline));
  e.action = verdict->action;
  e.message = "NIC port " + port + ": " + verdict->message;
  return e;
}

correlation_outcome node_correlator::observe(const health_event& e, wall_time now) {
  const auto at = e.generated.value_or(now);
  if (!dedup_.admit(e, at)) {
    correlation_outcome out;
    out.repeat = true;
    return out;
  }
  const auto subject = subject_of(e);
  switch (subject.what) {
    case correlation_subject::kind::gpu:
      return observe_gpu(gpus_.try_emplace(subject.key, config_).first->second,
                         subject.key, e, at);
    case correlation_subject::kind::nic_port:
      return observe_port(ports_.try_emplace(subject.key, config_).first->second,
                          subject.key, e, at);
    case correlation_subject::kind::none: break;
  }
  return {};
}

std::optional<wall_time> node_correlator::next_drop_check() const {
  std::optional<wall_time> out;
  for (const auto& [port, history] : ports_)
    if (auto at = history.next_check(); at && (!out || *at < *out))
      out = at;
  return out;
}

void node_correlator::explain_port_downs() {
  for (auto& [port, history] : ports_)
    history.explain_down();
}

std::vector<health_event> node_correlator::due_drops(const std::string& node,
                                                     wall_time now) {
  std::vector<health_event> out;
  for (auto& [port, history] : ports_)
    if (auto e = due_drop(history, node, port, now))
      out.push_back(std::move(*e));
  return out;
}

} // namespace vigil::control
