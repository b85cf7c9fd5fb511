#include "runtime/control_endpoints.hpp"

#include <array>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/fleet/agent_liveness.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/journal/journal_messages.hpp"
#include "messages/control_messages.hpp"

namespace vigil {

namespace {

using metrics_atom = caf::atom_constant<caf::atom("metrics")>;
using ready_atom = caf::atom_constant<caf::atom("ready")>;

constexpr auto ask_timeout = std::chrono::seconds{5};

http::response text(int status, std::string body) {
  return http::plain_text(status, std::move(body));
}

http::response to_http(const control::ingest_reply& reply) {
  http::response r;
  r.status = reply.http_status;
  r.body = reply.body;
  if (reply.retry_after_seconds)
    r.headers.emplace_back("Retry-After", std::to_string(*reply.retry_after_seconds));
  return r;
}

// One metric family: HELP, TYPE and a sample.
void family(std::string& out, const std::string& name, const char* type, const char* help,
            double value, const std::string& labels = {}) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  out += name + labels + " " + nlohmann::json(value).dump() + "\n";
}

double number(const nlohmann::json& j, const char* key) {
  auto i = j.find(key);
  if (i == j.end())
    return 0;
  if (i->is_boolean())
    return i->get<bool>() ? 1 : 0;
  return i->is_number() ? i->get<double>() : 0;
}

nlohmann::json object(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

// Gathers the figures one after the other; each ask has a timeout so a stuck
// actor makes /metrics partial, never hang.
void collect_metrics(endpoints_actor* self, http::responder reply) {
  auto& a = self->state.actors;
  auto out = std::make_shared<std::array<std::string, 3>>();
  self->request(a.ingest, ask_timeout, stats_atom::value)
    .then(
      [=](const std::string& ingest) {
        (*out)[0] = ingest;
        self->request(self->state.actors.fleet, ask_timeout, summary_atom::value)
          .then(
            [=](const std::string& fleet) {
              (*out)[1] = fleet;
              self->request(self->state.actors.breaker, ask_timeout, summary_atom::value)
                .then(
                  [=](const std::string& breaker) {
                    (*out)[2] = breaker;
                    self
                      ->request(self->state.actors.journal, ask_timeout,
                                stats_atom::value)
                      .then(
                        [=](const journal_stats& j) {
                          auto body = render_metrics((*out)[0], (*out)[1], (*out)[2], j);
                          if (const auto& m = self->state.actors.janitor_figures)
                            body += render_janitor_metrics(*m);
                          if (const auto& g = self->state.actors.gateway_figures)
                            body += render_gateway_metrics(*g);
                          reply(text(200, body));
                        },
                        [=](const caf::error& e) {
                          reply(text(503, caf::to_string(e)));
                        });
                  },
                  [=](const caf::error& e) { reply(text(503, caf::to_string(e))); });
            },
            [=](const caf::error& e) { reply(text(503, caf::to_string(e))); });
      },
      [=](const caf::error& e) { reply(text(503, caf::to_string(e))); });
}

} // namespace

std::string render_gateway_metrics(const kube_gateway_stats& stats) {
  struct figure {
    const char* name;
    const char* type;
    const char* help;
    const std::atomic<std::uint64_t>& value;
  };
  const figure figures[] = {
    {"vigil_kube_requests_total", "counter", "requests to the Kubernetes API server",
     stats.requests},
    {"vigil_kube_request_failures_total", "counter",
     "API server requests that failed after the client's retries", stats.failures},
    {"vigil_kube_requests_in_flight", "gauge",
     "API server requests waiting for their answer", stats.in_flight},
    {"vigil_kube_watch_events_total", "counter", "watch events received",
     stats.watch_events},
    {"vigil_kube_watch_relists_total", "counter",
     "watches that had to list again (410 Gone, or first start)", stats.relists},
    {"vigil_kube_watch_resumes_total", "counter",
     "watches resumed from their last resourceVersion", stats.resumes},
    {"vigil_kube_watch_bad_lines_total", "counter",
     "watch lines that did not parse and were skipped", stats.bad_watch_lines},
  };
  std::string out;
  for (const auto& f : figures)
    family(out, f.name, f.type, f.help, static_cast<double>(f.value.load()));
  return out;
}

std::string render_metrics(const std::string& ingest_stats,
                           const std::string& fleet_summary,
                           const std::string& breaker_summary,
                           const journal_stats& journal) {
  auto in = object(ingest_stats);
  auto fleet = object(fleet_summary);
  auto breaker = object(breaker_summary);
  std::string out;
  family(out, "vigil_events_received_total", "counter",
         "HealthEvent documents received on POST /v1/events", number(in, "received"));
  family(out, "vigil_events_rejected_total", "counter", "documents rejected as invalid",
         number(in, "rejected"));
  family(out, "vigil_events_journaled_total", "counter",
         "events committed to the journal", number(in, "journaled"));
  family(out, "vigil_events_duplicate_total", "counter",
         "events acknowledged as already journaled", number(in, "duplicates"));
  family(out, "vigil_events_unavailable_total", "counter",
         "events answered 503 because the journal was not ready in time",
         number(in, "unavailable"));
  family(out, "vigil_journal_committed_total", "counter", "journal appends committed",
         static_cast<double>(journal.committed));
  family(out, "vigil_journal_queue_depth", "gauge", "appends waiting for a batch",
         static_cast<double>(journal.queue_depth));
  family(out, "vigil_journal_lag_seconds", "gauge",
         "age of the oldest unacknowledged append",
         static_cast<double>(journal.lag_ns) / 1e9);
  family(out, "vigil_journal_available", "gauge", "1 while the database accepts writes",
         journal.available ? 1 : 0);
  family(out, "vigil_journal_refused_total", "counter",
         "appends refused because the journal's queue was full",
         static_cast<double>(journal.refused));
  family(out, "vigil_journal_write_failures_total", "counter",
         "batches the database failed to commit (retried)",
         static_cast<double>(journal.write_failures));
  family(out, "vigil_nodes", "gauge", "node actors", number(fleet, "nodes"));
  out += "# HELP vigil_mailbox_depth messages waiting in an actor's mailbox\n"
         "# TYPE vigil_mailbox_depth gauge\n";
  for (const auto& [actor, depth] :
       {std::pair{"ingest", number(in, "mailboxDepth")},
        {"fleet", number(fleet, "mailboxDepth")},
        {"breaker", number(breaker, "mailboxDepth")},
        {"journal", static_cast<double>(journal.mailbox_depth)}})
    out += "vigil_mailbox_depth{actor=\"" + std::string(actor) + "\"} "
           + std::to_string(static_cast<std::uint64_t>(depth)) + "\n";
  family(out, "vigil_node_mailbox_depth_max", "gauge",
         "deepest node-actor mailbox seen since the previous scrape",
         number(fleet, "nodeMailboxHigh"));
  family(out, "vigil_gpu_nodes", "gauge", "Nodes matching the GPU-node label",
         number(fleet, "gpuNodes"));
  family(out, "vigil_events_routed_total", "counter", "events handed to node actors",
         number(fleet, "routed"));
  family(out, "vigil_node_actor_restarts_total", "counter",
         "node actors restarted from the journal after a crash",
         number(fleet, "restarts"));
  family(out, "vigil_journal_undecodable_rows_total", "counter",
         "journal rows skipped at rebuild because they no longer decode",
         number(fleet, "undecodableRows"));
  family(out, "vigil_cordons_total", "counter", "Nodes cordoned by vigil",
         number(fleet, "cordons"));
  family(out, "vigil_uncordons_total", "counter", "Nodes vigil uncordoned",
         number(fleet, "uncordons"));
  family(out, "vigil_quarantines_held_total", "counter",
         "quarantine decisions held back by the breaker",
         number(fleet, "quarantinesHeld"));
  family(out, "vigil_drains_started_total", "counter", "drains started",
         number(fleet, "drainsStarted"));
  const auto started = static_cast<std::uint64_t>(number(fleet, "drainsStarted"));
  const auto partial = static_cast<std::uint64_t>(number(fleet, "drainsStartedPartial"));
  out += "# HELP vigil_drains_started_by_mode_total drains started: full, or partial "
         "(only the pods holding one GPU, seed 000 3.1)\n"
         "# TYPE vigil_drains_started_by_mode_total counter\n"
         "vigil_drains_started_by_mode_total{mode=\"full\"} "
         + std::to_string(started >= partial ? started - partial : 0)
         + "\nvigil_drains_started_by_mode_total{mode=\"partial\"} "
         + std::to_string(partial) + "\n";
  std::string outcomes;
  for (const auto& [label, key] :
       {std::pair<const char*, const char*>{"succeeded", "drainsSucceeded"},
        {"cancelled", "drainsCancelled"},
        {"skipped", "drainsSkipped"},
        {"held", "drainsHeld"}})
    outcomes += std::string("vigil_drains_total{outcome=\"") + label + "\"} "
                + std::to_string(static_cast<std::uint64_t>(number(fleet, key))) + "\n";
  out += "# HELP vigil_drains_total drains ended, by outcome (held: refused by the "
         "breaker)\n# TYPE vigil_drains_total counter\n"
         + outcomes;
  family(out, "vigil_evictions_total", "counter", "evictions the API server accepted",
         number(fleet, "evictions"));
  family(out, "vigil_pod_deletions_total", "counter",
         "pods deleted once their namespace's DeleteAfterTimeout ran out",
         number(fleet, "podDeletions"));
  out += "# HELP vigil_rule_firings_total correlation rule verdicts, by rule\n"
         "# TYPE vigil_rule_firings_total counter\n";
  for (auto [rule, key] :
       {std::pair<const char*, const char*>{"repeated-xid", "ruleFiringsRepeatedXid"},
        {"nic-flap", "ruleFiringsNicFlap"},
        {"nic-drop", "ruleFiringsNicDrop"}})
    out += std::string("vigil_rule_firings_total{rule=\"") + rule + "\"} "
           + std::to_string(static_cast<std::uint64_t>(number(fleet, key))) + "\n";
  family(out, "vigil_fabric_incidents_total", "counter",
         "fabric-wide NIC incidents opened or grown", number(fleet, "fabricIncidents"));
  std::string remediations;
  for (auto [label, key] :
       {std::pair<const char*, const char*>{"started", "remediationsStarted"},
        {"succeeded", "remediationsSucceeded"},
        {"failed", "remediationsFailed"},
        {"skipped", "remediationsSkipped"},
        {"manual", "remediationsManual"}})
    remediations += std::string("vigil_remediations_total{step=\"") + label + "\"} "
                    + std::to_string(static_cast<std::uint64_t>(number(fleet, key)))
                    + "\n";
  out += "# HELP vigil_remediations_total maintenance CRs by step (skipped: redundant "
         "by seed 000 4.3; manual: left to an operator)\n"
         "# TYPE vigil_remediations_total counter\n"
         + remediations;
  family(out, "vigil_escalations_total", "counter",
         "remediations moved up the escalation ladder", number(fleet, "escalations"));
  family(out, "vigil_breaker_tripped", "gauge", "1 while the circuit breaker is tripped",
         number(breaker, "tripped"));
  family(out, "vigil_breaker_cordons_in_window", "gauge",
         "nodes newly cordoned within the breaker's window",
         number(breaker, "cordonsInWindow"));
  family(out, "vigil_breaker_utilisation", "gauge",
         "share of the breaker's tighter limit used within its window (1: the next "
         "new cordon trips it)",
         number(breaker, "utilisation"));
  family(out, "vigil_breaker_refused_total", "counter",
         "new quarantines refused by the breaker", number(breaker, "refused"));
  family(out, "vigil_quarantines_admitted_total", "counter",
         "new quarantines the breaker admitted", number(breaker, "admitted"));
  return out;
}

caf::behavior endpoints(endpoints_actor* self, control_actors actors) {
  self->state.actors = std::move(actors);
  return {
    [=](metrics_atom, http::responder& reply) {
      collect_metrics(self, std::move(reply));
    },
    [=](ready_atom, http::responder& reply) {
      self->request(self->state.actors.fleet, ask_timeout, summary_atom::value)
        .then(
          [=](const std::string& summary) {
            auto s = object(summary);
            if (number(s, "standby") > 0)
              return reply(text(503, "standing by: another replica holds the Lease\n"));
            bool ready = number(s, "rebuilt") > 0 && number(s, "listed") > 0;
            reply(
              text(ready ? 200 : 503,
                   ready ? "ready\n" : "rebuilding from the journal or listing Nodes\n"));
          },
          [=](const caf::error& e) { reply(text(503, caf::to_string(e))); });
    },
    [=](reset_atom, http::responder& reply) {
      self->request(self->state.actors.breaker, ask_timeout, reset_atom::value)
        .then([=](const std::string&) { reply(text(200, "circuit breaker reset\n")); },
              [=](const caf::error& e) {
                reply(text(503, "reset not journaled: " + caf::to_string(e) + "\n"));
              });
    },
  };
}

http::handler make_control_handler(control_actors actors, caf::actor endpoints,
                                   control_http_options options) {
  return [=](http::request req, http::responder reply) {
    const bool post = req.method == "POST";
    auto authorised = [&] {
      if (control::bearer_token_matches(req.header("authorization"), options.token))
        return true;
      reply(to_http(control::error_reply(401, "missing or wrong bearer token")));
      return false;
    };
    if (req.path == "/v1/events") {
      if (!post)
        return reply(to_http(control::error_reply(405, "use POST")));
      if (!authorised())
        return;
      auto items =
        control::parse_ingest_body(req.body, req.header("content-type"), options.limits);
      if (!items)
        return reply(to_http(control::request_failure_reply(items.error())));
      ingest_request request;
      request.items = std::move(*items);
      request.reply = [reply](control::ingest_reply r) { reply(to_http(r)); };
      caf::anon_send(actors.ingest, ingest_atom::value, std::move(request));
      return;
    }
    if (req.path == "/v1/heartbeat") {
      if (!post)
        return reply(to_http(control::error_reply(405, "use POST")));
      if (!authorised())
        return;
      auto beat = control::decode_heartbeat(req.body);
      if (!beat)
        return reply(to_http(control::request_failure_reply(beat.error())));
      caf::anon_send(actors.fleet, agent_heard_atom::value, beat->node_name);
      return reply(text(200, "ok\n"));
    }
    if (req.path == "/v1/breaker/reset") {
      if (!post)
        return reply(to_http(control::error_reply(405, "use POST")));
      if (!authorised())
        return;
      return caf::anon_send(endpoints, reset_atom::value, http::responder(reply));
    }
    if (req.path == "/metrics")
      return caf::anon_send(endpoints, metrics_atom::value, http::responder(reply));
    if (req.path == "/readyz")
      return caf::anon_send(endpoints, ready_atom::value, http::responder(reply));
    if (req.path == "/healthz")
      return reply(text(200, "ok\n"));
    reply(to_http(control::error_reply(404, "no such endpoint: " + req.path)));
  };
}

} // namespace vigil
