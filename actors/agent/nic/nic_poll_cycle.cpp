// One poll cycle of nic_poller (seed 002 §3.4, §4.3, §7, Appendix A), kept
// apart from startup and file handling in nic_monitor_core.cpp.
#include "actors/agent/nic/nic_monitor_core.hpp"

#include <algorithm>

#include "actors/agent/nic/nic_events.hpp"
#include "actors/agent/nic/nic_health.hpp"

namespace vigil::agent {

namespace {

std::string device_of_key(const std::string& key) {
  return key.substr(0, key.rfind('/'));
}

// The link layer a device had when last seen, from its port records.
std::string recorded_link_layer(const nic_monitor_state& state,
                                const std::string& device) {
  for (const auto& [key, record] : state.ports)
    if (device_of_key(key) == device && !record.link_layer.empty())
      return record.link_layer;
  return "InfiniBand";
}

// seed 002 §3.1: INIT is "problematic if stuck >30s".
constexpr std::chrono::seconds card_escalation_delay{30};

std::string card_of(const nic_device& device) {
  auto card = pci_card(device.pci_address);
  return card.empty() ? device.name : card;
}

} // namespace

bool boot_changed(const std::string& persisted, const std::string& current) {
  return !persisted.empty() && !current.empty() && persisted != current;
}

// A device the poll watches, with its role and enabled checks.
struct nic_poller::monitored_device {
  const nic_device* device = nullptr;
  nic_role role = nic_role::compute;
  bool state_checked = false;
  bool counters_checked = false;
};

// One port whose state check is on, and how it reads now.
struct nic_poller::port_eval {
  const monitored_device* owner = nullptr;
  const ib_port* port = nullptr;
  std::optional<port_verdict> verdict; // nullopt: unexpected value
};

// One physical card within its role group.
struct nic_poller::card_summary {
  nic_role role = nic_role::compute;
  int active_ports = 0;
  bool complete = true; // every port could be judged
  std::string link_layer;
  std::vector<std::string> devices;
};

// The work of one poll() call, split into its steps.
class nic_poller::poll_run {
public:
  poll_run(nic_poller& poller, const nic_snapshot& snapshot, const std::string& boot_id,
           wall_time now)
    : poller_(poller), snapshot_(snapshot), ctx_{poller.options_.node_name,
                                                 poller.options_.strategy, boot_id, now} {
  }

  nic_poll_result run() {
    if (!snapshot_.listed) {
      // Nothing can be concluded when the directory itself is unreadable.
      result_.diagnostics.push_back(
        {"class/infiniband", "not listable; poll skipped, state kept"});
      return std::move(result_);
    }
    begin_boot();
    select_devices();
    detect_disappearance();
    evaluate_ports();
    detect_reappearance();
    summarise_cards();
    emit_port_events();
    emit_card_events();
    evaluate_counters_all();
    retain_state();
    return std::move(result_);
  }

private:
  // seed 002 §3.4 step 4: a changed boot ID (or no state) clears everything.
  // A boot ID that cannot be read proves no reboot: the state is kept (else
  // every unreadable poll would wipe the counter baselines and known devices
  // and hide a disappearance), and an unknown persisted ID is adopted.
  void begin_boot() {
    auto& state = poller_.state_;
    result_.baseline = !state || boot_changed(state->boot_id, ctx_.boot_id);
    if (result_.baseline) {
      if (state)
        result_.diagnostics.push_back({"boot_id", "changed from \"" + state->boot_id
                                                    + "\" to \"" + ctx_.boot_id
                                                    + "\": persisted NIC state cleared"});
      state = nic_monitor_state{};
    }
    if (!ctx_.boot_id.empty())
      state->boot_id = ctx_.boot_id;
  }

  nic_monitor_state& state() { return *poller_.state_; }

  void select_devices() {
    for (const auto& device : snapshot_.devices) {
      present_.insert(device.name);
      if (device.status == device_read::vanished) {
        candidates_.insert(device.name); // seed 002 §7: confirmed on the next poll
        continue;
      }
      if (device.is_vf)
        continue; // seed 002 §8: VFs are skipped unconditionally
      if (device.vendor.empty()) {
        result_.diagnostics.push_back(
          {device.name, "not a Mellanox device (seed 002 §10); not monitored"});
        continue;
      }
      auto cls = poller_.select(device, result_);
      if (!cls || cls->role == nic_role::management)
        continue;
      const auto ll = device.link_layer();
      const auto& checks = poller_.options_.checks;
      monitored_device m{&device, cls->role, checks.count(state_check_for(ll)) != 0,
                         checks.count(degradation_check_for(ll)) != 0};
      if (m.state_checked || m.counters_checked)
        monitored_.push_back(m);
    }
  }

  // seed 002 §7.2 case 1: a known device absent from the listing.
  void detect_disappearance() {
    for (const auto& name : std::set<std::string>(state().known_devices)) {
      if (present_.count(name) != 0)
        continue;
      result_.events.push_back(
        make_disappeared_event(ctx_, name, recorded_link_layer(state(), name)));
      state().known_devices.erase(name);
      state().disappeared_devices.insert(name);
    }
  }

  // A disappeared device clears its disappearance once it is back with a
  // port that works (ACTIVE/LinkUp). Seed 002 §7.3 takes the loss for a
  // hardware failure: a device that is merely listed again (a PCI rescan, a
  // driver reload with its links still down, or now excluded from
  // monitoring) keeps it until a port proves otherwise or the host reboots.
  void detect_reappearance() {
    std::set<std::string> working;
    for (const auto& eval : evals_)
      if (eval.verdict && eval.verdict->condition == port_condition::healthy)
        working.insert(eval.owner->device->name);
    auto& gone = state().disappeared_devices;
    for (auto it = gone.begin(); it != gone.end();) {
      if (working.count(*it) == 0) {
        ++it;
        continue;
      }
      result_.events.push_back(
        make_reappeared_event(ctx_, *it, recorded_link_layer(state(), *it)));
      it = gone.erase(it);
    }
  }

  void evaluate_ports() {
    for (const auto& m : monitored_) {
      if (!m.state_checked)
        continue;
      for (const auto& port : m.device->ports) {
        port_eval eval{&m, &port, std::nullopt};
        if (port.readable) {
          auto verdict = evaluate_port(port.state, port.physical_state, port.link_layer);
          if (verdict)
            eval.verdict = *verdict;
          else
            result_.diagnostics.push_back(
              {port_key(m.device->name, port.number) + " " + verdict.error().where,
               verdict.error().what});
        }
        evals_.push_back(eval);
      }
    }
  }

  // seed 002 §4.3.2: cards (PCI bus:device) per role, active ports counted.
  void summarise_cards() {
    for (const auto& eval : evals_) {
      const auto& device = *eval.owner->device;
      auto [it, fresh] = cards_.try_emplace(card_of(device));
      auto& card = it->second;
      if (fresh) {
        card.role = eval.owner->role; // the first NIC of a card sets its role
        card.link_layer = eval.port->link_layer;
      }
      if (card.devices.empty() || card.devices.back() != device.name)
        card.devices.push_back(device.name);
      if (!eval.verdict)
        card.complete = false;
      else if (eval.verdict->condition == port_condition::healthy)
        ++card.active_ports;
    }
    // A device vanishing mid-poll leaves its card half counted: judge no card.
    std::vector<card_ports> judged;
    for (const auto& [name, card] : cards_)
      if (card.complete && candidates_.empty())
        judged.push_back({name, card.role, card.active_ports});
    for (const auto& verdict : check_card_homogeneity(judged)) {
      card_verdicts_.push_back(verdict);
      if (verdict.anomalous && escalate(verdict.card))
        anomalous_.insert(verdict.card);
      else if (!verdict.anomalous)
        state().cards_below_mode_since.erase(verdict.card);
    }
    for (const auto& [name, card] : cards_)
      if ((!card.complete || !candidates_.empty()) && state().anomalous_cards.count(name))
        anomalous_.insert(name); // unjudged: keeps its last verdict
  }

  // A card below its peer mode is reported at once on a first poll (seed 002
  // §3.4, §7.2 case 3); at runtime once it has stayed there for
  // card_escalation_delay, so that a port passing through INIT or Polling is
  // not escalated (§3.1: INIT is "problematic if stuck >30s", §3.2).
  bool escalate(const std::string& card) {
    if (result_.baseline || state().anomalous_cards.count(card) != 0)
      return true;
    const auto now = unix_seconds(ctx_.now);
    const auto since = state().cards_below_mode_since.emplace(card, now).first->second;
    if (now - since < card_escalation_delay.count())
      return false;
    state().cards_below_mode_since.erase(card);
    return true;
  }

  // seed 002 §3.4 step 4: boundary crossings, baselines on a first poll.
  void emit_port_events() {
    for (const auto& eval : evals_) {
      if (!eval.verdict)
        continue;
      const auto& device = *eval.owner->device;
      const auto& port = *eval.port;
      auto& record = state().ports[port_key(device.name, port.number)];
      const auto previous = record.health;
      const auto now = next_health(*eval.verdict, previous);
      if (should_emit(*eval.verdict, previous, anomalous_.count(card_of(device)) != 0))
        result_.events.push_back(make_port_state_event(
          ctx_, device.name, port.number, port.link_layer, *eval.verdict,
          device.operstate, port_details(*eval.owner)));
      record.state = port.state;
      record.phys_state = port.physical_state;
      record.link_layer = port.link_layer;
      record.health = now;
    }
  }

  static recorded_health next_health(const port_verdict& verdict,
                                     recorded_health before) {
    switch (verdict.condition) {
      case port_condition::healthy: return recorded_health::healthy;
      case port_condition::unhealthy:
        if (verdict.fatal || before == recorded_health::unhealthy)
          return recorded_health::unhealthy;
        return recorded_health::degraded;
      case port_condition::unreported: return before;
    }
    return before;
  }

  bool should_emit(const port_verdict& verdict, recorded_health before,
                   bool card_anomalous) const {
    if (verdict.condition == port_condition::unreported)
      return false; // seed 002 §3.2: INIT/ARMED on Ethernet, DEBUG only
    const bool healthy = verdict.condition == port_condition::healthy;
    if (result_.baseline || before == recorded_health::unknown)
      // First poll of a boot, or a port without a snapshot: healthy ports
      // send a baseline; unhealthy ones only on anomalous cards (uncabled
      // ports on expected cards are not failures).
      return healthy || card_anomalous;
    // Seed 002's severities (§1.3, Appendix A): a degraded port (INIT,
    // Polling) that goes DOWN or Disabled crosses into fatal and says so;
    // otherwise the fatal REPLACE_VM would wait for the card check, which a
    // role group of one card never raises.
    if (before == recorded_health::degraded && verdict.fatal)
      return true;
    return healthy != (before == recorded_health::healthy);
  }

  std::map<std::string, std::string> port_details(const monitored_device& m) const {
    const auto& d = *m.device;
    std::map<std::string, std::string> out{{"role", std::string(to_string(m.role))}};
    for (const auto& [key, value] : {std::pair{"pci_address", d.pci_address},
                                     {"hca_type", d.hca_type},
                                     {"fw_ver", d.fw_ver},
                                     {"board_id", d.board_id},
                                     {"net_dev", d.net_dev}})
      if (!value.empty())
        out[key] = value;
    return out;
  }

  // seed 002 §4.3.3: a card below its role's mode is fatal; back at the mode
  // it recovers.
  void emit_card_events() {
    for (auto verdict : card_verdicts_) {
      const bool was = state().anomalous_cards.count(verdict.card) != 0;
      const bool is = anomalous_.count(verdict.card) != 0;
      if (is == was)
        continue;
      verdict.anomalous = is;
      const auto& card = cards_.at(verdict.card);
      result_.events.push_back(
        make_card_event(ctx_, verdict, card.devices, card.link_layer));
    }
    state().anomalous_cards = anomalous_;
    for (auto it = state().cards_below_mode_since.begin();
         it != state().cards_below_mode_since.end();)
      it = cards_.count(it->first) ? std::next(it)
                                   : state().cards_below_mode_since.erase(it);
  }

  // seed 002 Appendix A counters, measured from vigil's baselines: what a
  // counter held before vigil first read it on this boot is history (first
  // poll after install, a new port, after a reboot: begin_boot cleared the
  // state), so only rises vigil saw count.
  void evaluate_counters_all() {
    const auto& thresholds = poller_.options_.counter_thresholds;
    for (const auto& m : monitored_) {
      if (!m.counters_checked)
        continue;
      for (const auto& port : m.device->ports) {
        if (!port.readable)
          continue;
        auto& record = state().ports[port_key(m.device->name, port.number)];
        if (record.link_layer.empty())
          record.link_layer = port.link_layer;
        for (const auto& finding :
             evaluate_counters(record.counters, port.counters, thresholds))
          result_.events.push_back(make_counter_event(ctx_, m.device->name, port.number,
                                                      port.link_layer, finding));
      }
    }
  }

  // Keeps what later polls need: monitored devices, candidates awaiting
  // confirmation, and disappeared devices that may come back.
  void retain_state() {
    std::set<std::string> keep = candidates_;
    std::set<std::string> known;
    for (const auto& name : candidates_)
      if (state().known_devices.count(name) != 0)
        known.insert(name);
    for (const auto& m : monitored_) {
      keep.insert(m.device->name);
      if (m.state_checked)
        known.insert(m.device->name);
    }
    keep.insert(state().disappeared_devices.begin(), state().disappeared_devices.end());
    for (auto it = state().ports.begin(); it != state().ports.end();)
      it = keep.count(device_of_key(it->first)) ? std::next(it) : state().ports.erase(it);
    state().known_devices = std::move(known);
  }

  nic_poller& poller_;
  const nic_snapshot& snapshot_;
  nic_event_context ctx_;
  nic_poll_result result_;
  std::set<std::string> present_;
  std::set<std::string> candidates_;
  std::vector<monitored_device> monitored_;
  std::vector<port_eval> evals_;
  std::map<std::string, card_summary> cards_;
  std::vector<card_verdict> card_verdicts_;
  std::set<std::string> anomalous_;
};

nic_poll_result nic_poller::poll(const nic_snapshot& snapshot, const std::string& boot_id,
                                 wall_time now) {
  return poll_run{*this, snapshot, boot_id, now}.run();
}

} // namespace vigil::agent
