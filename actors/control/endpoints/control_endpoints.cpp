#include "actors/control/endpoints/control_endpoints.hpp"

#include <array>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/auth/authenticator.hpp"
#include "actors/control/console/console_api.hpp"
#include "actors/control/fleet/agent_liveness.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"

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

// One counter family with a series per (label value, key of `figures`).
prometheus::MetricFamily
labelled_counter(const char* name, const char* help, const char* label,
                 const nlohmann::json& figures,
                 std::initializer_list<std::pair<const char*, const char*>> series) {
  metrics::family_builder family(name, help, prometheus::MetricType::Counter);
  for (const auto& [value, key] : series)
    family.sample(number(figures, key), {{label, value}});
  return family.build();
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
                          auto families =
                            control_metric_families((*out)[0], (*out)[1], (*out)[2], j);
                          if (const auto& m = self->state.actors.janitor_figures)
                            metrics::append(families, m->collect());
                          if (const auto& g = self->state.actors.gateway_figures)
                            metrics::append(families, gateway_metric_families(*g));
                          if (const auto& h = self->state.actors.http_figures)
                            metrics::append(families, http_metric_families(*h));
                          if (const auto& f = self->state.actors.snapshot_figures)
                            metrics::append(families, snapshot_metric_families(*f));
                          auto r = text(200, metrics::exposition(families));
                          r.content_type = metrics::content_type;
                          reply(std::move(r));
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

metrics::family_list snapshot_metric_families(const snapshot_stats& stats) {
  auto value = [](const std::atomic<std::uint64_t>& v) {
    return static_cast<double>(v.load());
  };
  return {
    metrics::counter("vigil_fleet_snapshots_total", "fleet rebuild snapshots stored",
                     value(stats.taken)),
    metrics::counter("vigil_fleet_snapshot_failures_total",
                     "fleet snapshots or journal retention rounds that failed",
                     value(stats.failures)),
    metrics::gauge("vigil_fleet_snapshot_rows",
                   "journal rows the newest fleet snapshot names (they still shape "
                   "some node's state)",
                   value(stats.rows_kept)),
    metrics::counter("vigil_journal_rows_pruned_total",
                     "journal rows deleted by retention (journal.retention_days)",
                     value(stats.rows_pruned)),
  };
}

metrics::family_list gateway_metric_families(const kube_gateway_stats& stats) {
  struct figure {
    const char* name;
    bool gauge;
    const char* help;
    const std::atomic<std::uint64_t>& value;
  };
  const figure figures[] = {
    {"vigil_kube_requests_total", false, "requests to the Kubernetes API server",
     stats.requests},
    {"vigil_kube_request_failures_total", false,
     "API server requests that failed after the client's retries", stats.failures},
    {"vigil_kube_requests_in_flight", true,
     "API server requests waiting for their answer", stats.in_flight},
    {"vigil_kube_watch_events_total", false, "watch events received", stats.watch_events},
    {"vigil_kube_watch_relists_total", false,
     "watches that had to list again (410 Gone, or first start)", stats.relists},
    {"vigil_kube_watch_resumes_total", false,
     "watches resumed from their last resourceVersion", stats.resumes},
    {"vigil_kube_watch_bad_lines_total", false,
     "watch lines that did not parse and were skipped", stats.bad_watch_lines},
  };
  metrics::family_list out;
  for (const auto& f : figures) {
    const auto value = static_cast<double>(f.value.load());
    out.push_back(f.gauge ? metrics::gauge(f.name, f.help, value)
                          : metrics::counter(f.name, f.help, value));
  }
  return out;
}

metrics::family_list http_metric_families(const http::server_counters& counters) {
  const auto c = http::read_counters(counters);
  struct figure {
    const char* name;
    const char* help;
    std::uint64_t value;
  };
  const figure figures[] = {
    {"vigil_http_connections_total", "connections accepted", c.connections},
    {"vigil_http_requests_total", "complete requests handed to a handler", c.requests},
    {"vigil_http_connections_refused_total",
     "connections closed at once: over the server's connection limit",
     c.rejected_connections},
    {"vigil_http_requests_too_large_total",
     "requests refused unread for their body (413) or header (431) size",
     c.rejected_too_large},
    {"vigil_http_requests_malformed_total", "requests that were not HTTP/1.x (400)",
     c.bad_requests},
    {"vigil_http_requests_incomplete_total",
     "requests the client cut off mid-way (a truncated body); never handled",
     c.incomplete_requests},
    {"vigil_http_requests_slow_total",
     "requests not complete within the idle timeout (slowloris); closed",
     c.slow_requests},
    {"vigil_http_tls_failures_total", "TLS handshakes that failed or timed out",
     c.tls_failures},
  };
  metrics::family_list out;
  for (const auto& f : figures)
    out.push_back(metrics::counter(f.name, f.help, static_cast<double>(f.value)));
  out.push_back(metrics::gauge("vigil_http_connections_open", "connections open now",
                               static_cast<double>(c.active_connections)));
  return out;
}

std::string render_gateway_metrics(const kube_gateway_stats& stats) {
  return metrics::exposition(gateway_metric_families(stats));
}

metrics::family_list control_metric_families(const std::string& ingest_stats,
                                             const std::string& fleet_summary,
                                             const std::string& breaker_summary,
                                             const journal_stats& journal) {
  auto in = object(ingest_stats);
  auto fleet = object(fleet_summary);
  auto breaker = object(breaker_summary);
  metrics::family_list out;
  out.push_back(metrics::counter("vigil_events_received_total",
                                 "HealthEvent documents received on POST /v1/events",
                                 number(in, "received")));
  out.push_back(metrics::counter("vigil_events_rejected_total",
                                 "documents rejected as invalid",
                                 number(in, "rejected")));
  out.push_back(metrics::counter("vigil_events_journaled_total",
                                 "events committed to the journal",
                                 number(in, "journaled")));
  out.push_back(metrics::counter("vigil_events_duplicate_total",
                                 "events acknowledged as already journaled",
                                 number(in, "duplicates")));
  out.push_back(
    metrics::counter("vigil_events_unavailable_total",
                     "events answered 503 because the journal was not ready in time",
                     number(in, "unavailable")));
  out.push_back(metrics::counter("vigil_events_shed_total",
                                 "events answered 503 at once because "
                                 "ingest.max_pending_events appends were in flight",
                                 number(in, "shed")));
  out.push_back(
    metrics::counter("vigil_ingest_requests_shed_unread_total",
                     "requests answered 503 before their body was read: ingest was "
                     "shedding (their events are not counted)",
                     number(in, "requestsShedUnread")));
  out.push_back(metrics::counter(
    "vigil_events_coalesced_total",
    "events resent while their first journal append was in flight (appended once)",
    number(in, "coalesced")));
  out.push_back(metrics::counter(
    "vigil_events_resent_stored_total",
    "events resent after a 503 although stored, answered duplicate without the journal",
    number(in, "resentStored")));
  out.push_back(metrics::gauge("vigil_ingest_appends_in_flight",
                               "journal appends ingest is waiting on",
                               number(in, "appendsInFlight")));
  out.push_back(metrics::counter("vigil_journal_committed_total",
                                 "journal appends committed",
                                 static_cast<double>(journal.committed)));
  out.push_back(metrics::gauge("vigil_journal_queue_depth", "appends waiting for a batch",
                               static_cast<double>(journal.queue_depth)));
  out.push_back(metrics::gauge("vigil_journal_lag_seconds",
                               "age of the oldest unacknowledged append",
                               static_cast<double>(journal.lag_ns) / 1e9));
  out.push_back(metrics::gauge("vigil_journal_available",
                               "1 while the database accepts writes",
                               journal.available ? 1 : 0));
  out.push_back(metrics::counter("vigil_journal_refused_total",
                                 "appends refused because the journal's queue was full",
                                 static_cast<double>(journal.refused)));
  out.push_back(metrics::counter("vigil_journal_write_failures_total",
                                 "batches the database failed to commit (retried)",
                                 static_cast<double>(journal.write_failures)));
  out.push_back(metrics::counter("vigil_journal_memory_releases_total",
                                 "backlogs over after which free memory was handed back "
                                 "to the system",
                                 static_cast<double>(journal.memory_releases)));
  out.push_back(metrics::gauge("vigil_nodes", "node actors", number(fleet, "nodes")));
  metrics::family_builder mailboxes("vigil_mailbox_depth",
                                    "messages waiting in an actor's mailbox",
                                    prometheus::MetricType::Gauge);
  for (const auto& [actor, depth] :
       {std::pair{"ingest", number(in, "mailboxDepth")},
        {"fleet", number(fleet, "mailboxDepth")},
        {"breaker", number(breaker, "mailboxDepth")},
        {"journal", static_cast<double>(journal.mailbox_depth)}})
    mailboxes.sample(depth, {{"actor", actor}});
  out.push_back(mailboxes.build());
  out.push_back(
    metrics::gauge("vigil_node_mailbox_depth_max",
                   "deepest node-actor mailbox seen since the previous scrape",
                   number(fleet, "nodeMailboxHigh")));
  out.push_back(metrics::gauge("vigil_gpu_nodes", "Nodes matching the GPU-node label",
                               number(fleet, "gpuNodes")));
  out.push_back(metrics::counter("vigil_events_routed_total",
                                 "events handed to node actors",
                                 number(fleet, "routed")));
  out.push_back(metrics::counter("vigil_node_actor_restarts_total",
                                 "node actors restarted from the journal after a crash",
                                 number(fleet, "restarts")));
  out.push_back(
    metrics::counter("vigil_journal_undecodable_rows_total",
                     "journal rows skipped at rebuild because they no longer decode",
                     number(fleet, "undecodableRows")));
  out.push_back(metrics::counter("vigil_cordons_total", "Nodes cordoned by vigil",
                                 number(fleet, "cordons")));
  out.push_back(metrics::counter("vigil_uncordons_total", "Nodes vigil uncordoned",
                                 number(fleet, "uncordons")));
  out.push_back(metrics::counter("vigil_quarantines_held_total",
                                 "quarantine decisions held back by the breaker",
                                 number(fleet, "quarantinesHeld")));
  out.push_back(metrics::counter("vigil_drains_started_total", "drains started",
                                 number(fleet, "drainsStarted")));
  const double started = number(fleet, "drainsStarted");
  const double partial = number(fleet, "drainsStartedPartial");
  out.push_back(metrics::family_builder("vigil_drains_started_by_mode_total",
                                        "drains started: full, or partial (only the "
                                        "pods holding one GPU, seed 000 3.1)",
                                        prometheus::MetricType::Counter)
                  .sample(started >= partial ? started - partial : 0, {{"mode", "full"}})
                  .sample(partial, {{"mode", "partial"}})
                  .build());
  out.push_back(labelled_counter(
    "vigil_drains_total", "drains ended, by outcome (held: refused by the breaker)",
    "outcome", fleet,
    {{"succeeded", "drainsSucceeded"},
     {"cancelled", "drainsCancelled"},
     {"skipped", "drainsSkipped"},
     {"held", "drainsHeld"}}));
  out.push_back(metrics::counter("vigil_evictions_total",
                                 "evictions the API server accepted",
                                 number(fleet, "evictions")));
  out.push_back(
    metrics::counter("vigil_pod_deletions_total",
                     "pods deleted once their namespace's DeleteAfterTimeout ran out",
                     number(fleet, "podDeletions")));
  out.push_back(labelled_counter("vigil_rule_firings_total",
                                 "correlation rule verdicts, by rule", "rule", fleet,
                                 {{"repeated-xid", "ruleFiringsRepeatedXid"},
                                  {"nic-flap", "ruleFiringsNicFlap"},
                                  {"nic-drop", "ruleFiringsNicDrop"}}));
  out.push_back(metrics::counter("vigil_fabric_incidents_total",
                                 "fabric-wide NIC incidents opened or grown",
                                 number(fleet, "fabricIncidents")));
  out.push_back(labelled_counter(
    "vigil_remediations_total",
    "maintenance CRs by step (skipped: redundant by seed 000 4.3; manual: left to an "
    "operator)",
    "step", fleet,
    {{"started", "remediationsStarted"},
     {"succeeded", "remediationsSucceeded"},
     {"failed", "remediationsFailed"},
     {"skipped", "remediationsSkipped"},
     {"manual", "remediationsManual"}}));
  out.push_back(metrics::counter("vigil_escalations_total",
                                 "remediations moved up the escalation ladder",
                                 number(fleet, "escalations")));
  out.push_back(metrics::gauge("vigil_breaker_tripped",
                               "1 while the circuit breaker is tripped",
                               number(breaker, "tripped")));
  out.push_back(metrics::gauge("vigil_breaker_cordons_in_window",
                               "nodes newly cordoned within the breaker's window "
                               "(sharded: the fleet's, as this replica's journal "
                               "tail has read it)",
                               number(breaker, "cordonsInWindow")));
  out.push_back(metrics::gauge(
    "vigil_breaker_utilisation",
    "share of the breaker's tighter limit used within its window (1: the next "
    "new cordon trips it; sharded: the fleet's window and limits)",
    number(breaker, "utilisation")));
  out.push_back(metrics::counter("vigil_breaker_refused_total",
                                 "new quarantines refused by the breaker",
                                 number(breaker, "refused")));
  out.push_back(metrics::counter("vigil_quarantines_admitted_total",
                                 "new quarantines the breaker admitted",
                                 number(breaker, "admitted")));
  return out;
}

std::string render_metrics(const std::string& ingest_stats,
                           const std::string& fleet_summary,
                           const std::string& breaker_summary,
                           const journal_stats& journal) {
  return metrics::exposition(
    control_metric_families(ingest_stats, fleet_summary, breaker_summary, journal));
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

namespace {

using identity_then = std::function<void(control::agent_identity)>;

// Runs `then` with the caller's identity: the static token (any node), an
// agent's token the API server vouches for (its node only), or anyone when
// no authentication is configured; otherwise answers 401, or 503 when the
// API server could not be asked (the agent retries).
void with_identity(const control_http_options& options, const http::request& req,
                   const http::responder& reply, control::token_use use,
                   identity_then then) {
  const auto header = req.header("authorization");
  const bool reviewed =
    use == control::token_use::agent ? options.agent_tokens : options.metrics_auth;
  if (options.token.empty() && !reviewed)
    return then({"anonymous", "", true});
  if (!options.token.empty() && control::bearer_token_matches(header, options.token))
    return then({"static token", "", true});
  auto token = control::bearer_token(header);
  if (!reviewed || !options.authenticator || !token)
    return reply(to_http(control::error_reply(401, "missing or wrong bearer token")));
  authenticate_request request;
  request.token = std::move(*token);
  request.use = use;
  request.done = [reply, then = std::move(then), retry = options.retry_after_seconds](
                   expected<control::agent_identity> who) {
    if (who)
      return then(std::move(*who));
    if (who.error().where == "TokenReview") {
      auto unavailable = control::error_reply(503, who.error().what);
      unavailable.retry_after_seconds = retry;
      return reply(to_http(unavailable));
    }
    reply(
      to_http(control::error_reply(401, "bearer token refused: " + who.error().what)));
  };
  caf::anon_send(options.authenticator, authenticate_atom::value, std::move(request));
}

// 403 naming the node, when `who` may not report for one of `nodes`.
bool refuse_foreign(const control::agent_identity& who,
                    const std::vector<std::string>& nodes, const http::responder& reply) {
  auto other = control::foreign_node(who, nodes);
  if (!other)
    return false;
  reply(to_http(control::error_reply(403, "the token of " + who.username
                                            + " is bound to node " + who.node
                                            + "; it may not report for node " + *other)));
  return true;
}

} // namespace

http::handler make_control_handler(control_actors actors, caf::actor endpoints,
                                   control_http_options options) {
  return [=](http::request req, http::responder reply) {
    const bool post = req.method == "POST";
    auto shared = std::make_shared<http::request>(std::move(req));
    const auto& path = shared->path;
    if (is_console_path(path)) {
      if (!options.console)
        return reply(to_http(control::error_reply(404, "no console here")));
      // The API is read-only for the static token or a reader's own token
      // (as /metrics), open only where no token is configured or the demo
      // says so. The page itself holds no data and must load in a browser,
      // which sends no bearer token with a navigation: it asks for one.
      auto read = [=](control::agent_identity) {
        caf::anon_send(options.console, console_request_atom::value, *shared, reply);
      };
      if (options.console_open || path.rfind("/console", 0) == 0)
        return read({});
      return with_identity(options, *shared, reply, control::token_use::metrics_reader,
                           read);
    }
    // HealthEvents (NDJSON, a JSON array or one object), or Alertmanager's
    // webhook; both journaled by the ingest actor, with the same answer.
    if (path == "/v1/events" || path == "/v1/alertmanager") {
      if (!post)
        return reply(to_http(control::error_reply(405, "use POST")));
      const bool alerts = path == "/v1/alertmanager";
      return with_identity(
        options, *shared, reply, control::token_use::agent,
        [=](control::agent_identity who) {
          // Ingest is shedding: refused before the body is read, at no cost
          // to ingest or the journal (ingest_gate).
          if (actors.admission_gate
              && actors.admission_gate->shedding.load(std::memory_order_relaxed)) {
            ++actors.admission_gate->shed_requests;
            auto busy = control::error_reply(
              503,
              "the journal is behind; nothing was read, retry after the Retry-After");
            busy.retry_after_seconds = options.retry_after_seconds;
            return reply(to_http(busy));
          }
          auto items =
            alerts
              ? control::parse_alertmanager_body(shared->body,
                                                 shared->header("content-type"),
                                                 options.alertmanager, options.limits)
              : control::parse_ingest_body(shared->body, shared->header("content-type"),
                                           options.limits);
          if (!items)
            return reply(to_http(control::request_failure_reply(items.error())));
          std::vector<std::string> nodes;
          for (const auto& item : *items)
            if (item.event)
              nodes.push_back(item.event->node_name);
          if (refuse_foreign(who, nodes, reply))
            return;
          ingest_request request;
          request.items = std::move(*items);
          request.reply = [reply](control::ingest_reply r) { reply(to_http(r)); };
          caf::anon_send(actors.ingest, ingest_atom::value, std::move(request));
        });
    }
    if (path == "/v1/heartbeat") {
      if (!post)
        return reply(to_http(control::error_reply(405, "use POST")));
      return with_identity(
        options, *shared, reply, control::token_use::agent,
        [=](control::agent_identity who) {
          auto beat = control::decode_heartbeat(shared->body);
          if (!beat)
            return reply(to_http(control::request_failure_reply(beat.error())));
          if (refuse_foreign(who, {beat->node_name}, reply))
            return;
          caf::anon_send(actors.fleet, agent_heard_atom::value, beat->node_name);
          if (beat->gpus)
            caf::anon_send(actors.fleet, gpu_facts_atom::value, beat->node_name,
                           std::move(*beat->gpus));
          reply(text(200, "ok\n"));
        });
    }
    // The node agent's PodResources report (seed 000 §3.1); a snapshot it
    // sends again every minute, so it is handed on, not journaled.
    if (path == "/v1/allocations") {
      if (!post)
        return reply(to_http(control::error_reply(405, "use POST")));
      return with_identity(
        options, *shared, reply, control::token_use::agent,
        [=](control::agent_identity who) {
          auto report = decode_gpu_allocations(shared->body);
          if (!report)
            return reply(to_http(control::request_failure_reply(report.error())));
          if (refuse_foreign(who, {report->node}, reply))
            return;
          caf::anon_send(actors.fleet, allocations_atom::value, std::move(*report));
          reply(text(202, "accepted\n"));
        });
    }
    if (path == "/v1/breaker/reset") {
      if (!post)
        return reply(to_http(control::error_reply(405, "use POST")));
      return with_identity(
        options, *shared, reply, control::token_use::agent,
        [=](control::agent_identity who) {
          if (!who.any_node)
            return reply(to_http(control::error_reply(
              403,
              "an agent's token may not reset the circuit breaker; use the operator's "
              "token (control.token_file)")));
          caf::anon_send(endpoints, reset_atom::value, http::responder(reply));
        });
    }
    if (path == "/metrics") {
      if (!options.metrics_auth)
        return caf::anon_send(endpoints, metrics_atom::value, http::responder(reply));
      return with_identity(options, *shared, reply, control::token_use::metrics_reader,
                           [=](const control::agent_identity&) {
                             caf::anon_send(endpoints, metrics_atom::value,
                                            http::responder(reply));
                           });
    }
    if (path == "/readyz")
      return caf::anon_send(endpoints, ready_atom::value, http::responder(reply));
    if (path == "/healthz")
      return reply(text(200, "ok\n"));
    reply(to_http(control::error_reply(404, "no such endpoint: " + path)));
  };
}

} // namespace vigil
