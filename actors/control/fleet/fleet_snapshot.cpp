// The fleet's rebuild snapshot: the reading of each journal row a rebuild
// folds, and the rule for which rows still matter (fleet_snapshot.hpp).
#include "actors/control/fleet/fleet_snapshot.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/drain/drain_resource.hpp"
#include "actors/control/leader/shard_assignment.hpp"
#include "actors/control/node/node_actor.hpp"
#include "actors/control/remediation/remediation_resource.hpp"

namespace vigil {

using nlohmann::json;

namespace {

// A string field of a journal row's body; "" when absent or not a string
// (rows written by another version must not stop a rebuild).
std::string text_of(const json& body, const char* key) {
  if (!body.is_object())
    return {};
  auto it = body.find(key);
  return it != body.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

} // namespace

bool read_by_every_replica(const journal_record& row) {
  // A substring test, no decode: the writer routes every row it stores.
  return row.kind != "event" || row.body.find("NICPort") != std::string::npos;
}

tail_routing fleet_tail_routing(std::uint32_t shards) {
  tail_routing routing;
  routing.shards = shards;
  routing.shard_of = [shards](const journal_record& row) -> std::optional<std::uint32_t> {
    if (read_by_every_replica(row))
      return std::nullopt;
    return control::shard_of(row.node, shards);
  };
  return routing;
}

folded_row classify_row(const journal_record& row) {
  folded_row out;
  if (row.kind == breaker_row::tripped || row.kind == breaker_row::reset) {
    out.what = folded_row::kind::breaker_state;
    return out;
  }
  if (row.kind == quarantine_row) {
    // The quarantines the breaker counted (a cordon or a new taint), so its
    // window survives a restart.
    auto body = json::parse(row.body, nullptr, false);
    if (body.is_object()
        && (body.value("startsQuarantine", false) || body.value("cordon", false)))
      out.what = folded_row::kind::breaker_cordon;
    return out;
  }
  if (row.kind == control::drain_row) {
    // A completed drain (succeeded, skipped, dry run): not cancelled ones.
    auto body = json::parse(row.body, nullptr, false);
    const auto phase = text_of(body, "phase");
    if (phase == "succeeded" || phase == "skipped" || phase == "dry_run") {
      out.what = folded_row::kind::drain_mark;
      out.drain_key = text_of(body, "drain");
    }
    return out;
  }
  if (row.kind == fabric_row) {
    // Fleet-wide; each of its nodes dropped its port-down records then.
    auto body = json::parse(row.body, nullptr, false);
    if (body.is_object() && body.contains("nodes") && body["nodes"].is_array()) {
      out.what = folded_row::kind::fabric_mark;
      for (const auto& n : body["nodes"])
        if (n.is_string())
          out.fabric_nodes.push_back(n.get<std::string>());
    }
    return out;
  }
  if (row.kind == control::remediation_row) {
    auto body = json::parse(row.body, nullptr, false);
    const auto phase = text_of(body, "phase");
    const auto dry = body.is_object() && body.contains("dryRun")
                     && body["dryRun"].is_boolean() && body["dryRun"].get<bool>();
    const auto cr = text_of(body, "cr");
    if (phase == "succeeded" || phase == "failed" || phase == "released") {
      if (!cr.empty()) {
        out.what = folded_row::kind::outcome;
        out.cr = cr;
      }
      return out;
    }
    // seed 003 "validate before return": the node waits for the Job after
    // its CR succeeded; a successor must follow the Job, not return the node.
    if (phase == "validating" && !cr.empty() && !dry) {
      out.what = folded_row::kind::validation;
      out.cr = cr;
      return out;
    }
    if (phase == "validated" || phase == "validation_failed") {
      out.what = folded_row::kind::outcome;
      out.cr = cr;
      out.ends_validation = true;
      return out;
    }
    if ((phase != "created" && phase != "handed_to_provider") || dry)
      return out;
    auto action = parse_recommended_action(text_of(body, "action"));
    if (!action)
      return out;
    out.what = folded_row::kind::attempt;
    out.attempt.action = *action;
    out.attempt.gpu_uuid = text_of(body, "gpuUUID");
    out.attempt.at = row.recorded_at;
    out.attempt.event_id = text_of(body, "eventId");
    out.attempt.custom_action = text_of(body, "customAction");
    out.attempt.cr = cr;
    out.attempt.open = phase == "created" && !cr.empty();
    return out;
  }
  if (row.kind != "event")
    return out;
  auto event = decode_health_event(row.body);
  if (!event) {
    out.what = folded_row::kind::undecodable;
    return out;
  }
  out.what = folded_row::kind::event;
  out.event = std::move(*event);
  return out;
}

std::string snapshot_horizons::to_json() const {
  return json{
    {"dedupSeconds", dedup.count()},     {"gpuSeconds", gpu.count()},
    {"nicSeconds", nic.count()},         {"remediationSeconds", remediation.count()},
    {"breakerSeconds", breaker.count()}, {"lateSeconds", late.count()},
    {"flapThreshold", flap_threshold}}
    .dump();
}

std::optional<snapshot_horizons> snapshot_horizons::from_json(const std::string& text) {
  auto body = json::parse(text, nullptr, false);
  if (!body.is_object())
    return std::nullopt;
  snapshot_horizons out;
  for (auto [key, into] : {std::pair{"dedupSeconds", &out.dedup},
                           {"gpuSeconds", &out.gpu},
                           {"nicSeconds", &out.nic},
                           {"remediationSeconds", &out.remediation},
                           {"breakerSeconds", &out.breaker},
                           {"lateSeconds", &out.late}}) {
    auto it = body.find(key);
    if (it == body.end() || !it->is_number_integer())
      return std::nullopt;
    *into = std::chrono::seconds{it->get<std::int64_t>()};
  }
  auto it = body.find("flapThreshold");
  if (it == body.end() || !it->is_number_unsigned())
    return std::nullopt;
  out.flap_threshold = it->get<std::size_t>();
  return out;
}

bool snapshot_horizons::covers(const snapshot_horizons& needed) const {
  return dedup >= needed.dedup && gpu >= needed.gpu && nic >= needed.nic
         && remediation >= needed.remediation && breaker >= needed.breaker
         && late >= needed.late && flap_threshold <= needed.flap_threshold;
}

snapshot_horizons horizons_of(const control::correlation_config& c,
                              std::chrono::seconds breaker_window) {
  snapshot_horizons h;
  h.dedup = c.dedup_window;
  h.gpu = std::max({c.xid_window, c.xid_sticky, c.xid_burst});
  h.nic = std::max({c.nic_flap_window, c.nic_drop_after, c.fabric_window, c.fabric_hold});
  h.remediation = c.remediation_window;
  h.breaker = breaker_window;
  h.flap_threshold = c.nic_flap_threshold;
  return h;
}

std::chrono::seconds influence_of(const health_event& event, const snapshot_horizons& h) {
  auto out = h.dedup;
  // The histories an event joins (seed 002 §6): a GPU's fatal XIDs, a NIC
  // port's link state and link_downed rises; and the fabric window.
  switch (control::subject_of(event).what) {
    case control::correlation_subject::kind::gpu: out = std::max(out, h.gpu); break;
    case control::correlation_subject::kind::nic_port: out = std::max(out, h.nic); break;
    case control::correlation_subject::kind::none: break;
  }
  if (control::reports_link_down(event))
    out = std::max(out, h.nic);
  return out + h.late;
}

namespace {

// Tracked whatever the quarantine policy says: an unhealthy event that may
// act becomes a record, so an empty set here is empty under any policy.
health_event tracked(health_event event) {
  if (event.is_healthy || event.strategy != processing_strategy::execute_remediation)
    return event;
  if (!event.quarantine_overrides)
    event.quarantine_overrides = stage_override{};
  if (!event.quarantine_overrides->skip)
    event.quarantine_overrides->force = true;
  return event;
}

wall_time event_time(const health_event& event, const journal_record& row) {
  return event.generated.value_or(row.recorded_at);
}

} // namespace

snapshot_builder::snapshot_builder(control::correlation_config correlation,
                                   std::chrono::seconds breaker_window,
                                   std::vector<std::string> alias_entity_types)
  : correlation_(std::move(correlation)),
    horizons_(horizons_of(correlation_, breaker_window)) {
  policy_.rules.clear();
  policy_.alias_entity_types = std::move(alias_entity_types);
}

snapshot_builder::node_history& snapshot_builder::node(const std::string& name) {
  return nodes_.try_emplace(name, correlation_).first->second;
}

bool snapshot_builder::at_rest(const node_history& h, wall_time event_at,
                               wall_time recorded) const {
  return h.active.empty() && h.fabric.ports().empty() && !h.correlator.next_drop_check()
         && std::none_of(h.attempts.begin(), h.attempts.end(),
                         [](const attempt_row& a) { return a.open; })
         && h.until_event <= event_at && h.until_recorded <= recorded;
}

// Its rows so far no longer matter: the rules start afresh, as they would
// find themselves (every window past, nothing active).
void snapshot_builder::rest(node_history& h) {
  h.rows.clear();
  h.correlator = control::node_correlator(correlation_);
  h.active = {};
  h.fabric = {};
}

void snapshot_builder::add_event(node_history& h, row_ref ref, const journal_record& row,
                                 const health_event& event) {
  const auto at = event_time(event, row);
  if (!h.rows.empty() && at_rest(h, at, row.recorded_at))
    rest(h);
  // The node actor's path (node_correlation.cpp): the correlator's verdict,
  // then the events it makes, applied in turn.
  const auto applied =
    control::events_in_order(event, h.correlator.observe(event, row.recorded_at));
  for (const auto& e : applied) {
    h.active.apply(tracked(e), policy_);
    h.fabric.observe(e);
  }
  const auto reach = influence_of(event, horizons_);
  h.until_event = std::max(h.until_event, at + reach);
  h.until_recorded = std::max(h.until_recorded, row.recorded_at + reach);
  h.rows.push_back(ref);
}

void snapshot_builder::add(const journal_record& row) {
  const row_ref ref{added_++, row.seq};
  auto folded = classify_row(row);
  switch (folded.what) {
    case folded_row::kind::ignored: return;
    case folded_row::kind::undecodable: ++undecodable_; return;
    case folded_row::kind::breaker_state: breaker_states_.push_back(ref); return;
    case folded_row::kind::breaker_cordon:
      breaker_cordons_.emplace_back(ref, row.recorded_at);
      return;
    case folded_row::kind::drain_mark: node(row.node).rows.push_back(ref); return;
    case folded_row::kind::fabric_mark:
      for (const auto& name : folded.fabric_nodes) {
        // As the node actor takes it (drop_port_downs): the records the
        // fabric explains go, their ports are the fabric's until up again.
        auto& h = node(name);
        std::vector<control::active_record> covered;
        for (auto& r : h.active.records())
          if (control::explained_by_fabric(r))
            covered.push_back(std::move(r));
        h.fabric.incident(covered);
        h.active.remove_if(control::explained_by_fabric);
        h.correlator.explain_port_downs();
        h.rows.push_back(ref);
      }
      return;
    case folded_row::kind::attempt: {
      auto& h = node(row.node);
      h.attempts.push_back(
        {ref, row.recorded_at, folded.attempt.cr, folded.attempt.open});
      return;
    }
    case folded_row::kind::outcome:
    case folded_row::kind::validation: {
      auto& h = node(row.node);
      auto cr = apply_to_attempts(folded, h.attempts);
      h.outcomes.emplace_back(ref, cr.empty() ? folded.cr : cr);
      return;
    }
    case folded_row::kind::event: {
      const auto& event = *folded.event;
      add_event(node(event.node_name), ref, row, event);
      return;
    }
  }
}

std::vector<std::int64_t> snapshot_builder::keep(wall_time now) {
  std::vector<row_ref> kept;
  for (auto i = nodes_.begin(); i != nodes_.end();) {
    auto& h = i->second;
    if (at_rest(h, now, now))
      rest(h);
    kept.insert(kept.end(), h.rows.begin(), h.rows.end());
    // seed 000 §4: attempts count within the remediation window; one still
    // open is followed after a restart whatever its age.
    h.attempts.erase(std::remove_if(h.attempts.begin(), h.attempts.end(),
                                    [&](const attempt_row& a) {
                                      return !a.open
                                             && a.at + horizons_.remediation < now;
                                    }),
                     h.attempts.end());
    std::set<std::string> crs;
    for (const auto& a : h.attempts) {
      kept.push_back(a.row);
      crs.insert(a.cr);
    }
    h.outcomes.erase(
      std::remove_if(h.outcomes.begin(), h.outcomes.end(),
                     [&](const auto& o) { return crs.count(o.second) == 0; }),
      h.outcomes.end());
    for (const auto& o : h.outcomes)
      kept.push_back(o.first);
    if (h.rows.empty() && h.attempts.empty())
      i = nodes_.erase(i);
    else
      ++i;
  }
  // The breaker: its latest trip or reset decides whether it is tripped;
  // the cordons it counts are those within its window.
  if (breaker_states_.size() > 1)
    breaker_states_.erase(breaker_states_.begin(), breaker_states_.end() - 1);
  kept.insert(kept.end(), breaker_states_.begin(), breaker_states_.end());
  breaker_cordons_.erase(
    std::remove_if(breaker_cordons_.begin(), breaker_cordons_.end(),
                   [&](const auto& c) { return c.second + horizons_.breaker < now; }),
    breaker_cordons_.end());
  for (const auto& c : breaker_cordons_)
    kept.push_back(c.first);
  // In the order added; a fabric row kept for several nodes once.
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  std::vector<std::int64_t> seqs;
  seqs.reserve(kept.size());
  for (const auto& ref : kept)
    seqs.push_back(ref.second);
  return seqs;
}

namespace {

constexpr std::size_t snapshot_page = 10000;

} // namespace

// The newest stored snapshot usable with these horizons: its rows in its
// order, and its position; the journal's start when there is none.
expected<journal_position> snapshot_taker::resume(journal_store& store) {
  auto latest = store.latest_fleet_snapshot();
  if (!latest)
    return latest.error();
  auto taken_with = snapshot_horizons::from_json(latest->horizons);
  if (latest->id == 0 || !taken_with || !taken_with->covers(builder_.horizons()))
    return journal_position{};
  last_ = *latest; // kept by the store beside the next one
  for (std::size_t from = 0; from < latest->rows.size(); from += snapshot_page) {
    journal_query query;
    const auto to = std::min(latest->rows.size(), from + snapshot_page);
    query.seqs.assign(latest->rows.begin() + static_cast<std::ptrdiff_t>(from),
                      latest->rows.begin() + static_cast<std::ptrdiff_t>(to));
    auto rows = store.read(query);
    if (!rows)
      return rows.error();
    std::map<std::int64_t, const journal_record*> by_seq;
    for (const auto& row : *rows)
      by_seq.emplace(row.seq, &row);
    for (auto seq : query.seqs)
      if (auto i = by_seq.find(seq); i != by_seq.end())
        builder_.add(*i->second);
  }
  return latest->position;
}

expected<std::uint64_t> prune_journal(journal_store& store, const fleet_snapshot& newest,
                                      const fleet_snapshot* previous, wall_time before,
                                      std::size_t max_scanned, std::int64_t& after_seq) {
  journal_prune round;
  round.recorded_before = before;
  round.through = newest.position;
  round.keep = newest.rows;
  if (previous) {
    round.through = std::min(round.through, previous->position);
    round.keep.insert(round.keep.end(), previous->rows.begin(), previous->rows.end());
  }
  std::sort(round.keep.begin(), round.keep.end());
  round.after_seq = after_seq;
  std::uint64_t deleted = 0;
  for (std::size_t scanned = 0; scanned < max_scanned; scanned += round.limit) {
    auto pruned = store.prune(round);
    if (!pruned)
      return pruned.error();
    deleted += pruned->deleted;
    round.after_seq = pruned->done ? 0 : pruned->scanned_to;
    if (pruned->done)
      break;
  }
  after_seq = round.after_seq;
  return deleted;
}

std::chrono::seconds longest_horizon(const snapshot_horizons& h) {
  return std::max({h.dedup, h.gpu, h.nic, h.remediation, h.breaker}) + h.late;
}

expected<fleet_snapshot> snapshot_taker::take(journal_store& store, wall_time now) {
  if (!resumed_) {
    auto from = resume(store);
    if (!from) {
      builder_ = fresh_;
      return from.error();
    }
    at_ = *from;
    resumed_ = true;
  }
  for (;;) {
    auto page = store.tail(at_, snapshot_page);
    if (!page)
      return page.error();
    for (const auto& row : page->rows)
      builder_.add(row);
    at_ = page->next;
    if (page->rows.size() < snapshot_page)
      break;
  }
  fleet_snapshot snapshot;
  snapshot.taken_at = now;
  snapshot.position = at_;
  snapshot.horizons = builder_.horizons().to_json();
  snapshot.rows = builder_.keep(now);
  if (auto stored = store.put_fleet_snapshot(snapshot); !stored)
    return stored.error();
  previous_ = std::move(last_);
  last_ = snapshot;
  return snapshot;
}

} // namespace vigil
