#include "actors/agent/agent_endpoints.hpp"

#include <functional>
#include <memory>
#include <utility>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "runtime/metrics/metrics.hpp"

namespace vigil {

namespace {

using health_atom = caf::atom_constant<caf::atom("health")>;
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;

// The responder as a message: std::function is not inspectable.
struct http_reply {
  http::responder send;
};

} // namespace
} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::http_reply)

namespace vigil {

namespace {

http::response text(int status, std::string body) {
  return http::plain_text(status, std::move(body));
}

using prometheus::MetricType;

void counter(metrics::family_list& out, const char* name, const char* help,
             std::uint64_t value) {
  out.push_back(metrics::counter(name, help, static_cast<double>(value)));
}

void gauge(metrics::family_list& out, const char* name, const char* help, double value) {
  out.push_back(metrics::gauge(name, help, value));
}

// Unix seconds, 0 for "never".
double unix_time(const std::optional<wall_time>& t) {
  if (!t)
    return 0;
  return static_cast<double>(unix_seconds(*t)) + unix_nanos(*t) / 1e9;
}

void render_forwarder(metrics::family_list& out, const agent::forwarder_figures& f) {
  const auto& e = f.events;
  counter(out, "vigil_agent_events_submitted_total",
          "HealthEvents the monitors handed to the forwarder", e.submitted);
  counter(out, "vigil_agent_events_sent_total", "events the control plane accepted",
          e.events_accepted);
  counter(out, "vigil_agent_events_rejected_total",
          "events the control plane refused as invalid (dropped)", e.events_rejected);
  counter(out, "vigil_agent_events_spooled_total",
          "events written to the disk spool while the control plane was away", f.spooled);
  counter(out, "vigil_agent_events_dropped_total",
          "spooled non-fatal events dropped to make room", e.spool_dropped);
  counter(out, "vigil_agent_events_refused_total",
          "events neither queued nor spooled (spool full of fatal events, or broken)",
          e.refused);
  counter(out, "vigil_agent_batches_sent_total", "batch POSTs to the control plane",
          e.batches_sent);
  metrics::family_builder failures(
    "vigil_agent_send_failures_total",
    "batch POSTs not delivered, by reason; their events wait in the spool and are "
    "sent again (unreachable, credentials, endpoint: check --control-url and the "
    "token; too_large, overloaded: the control plane's limits and load)",
    MetricType::Counter);
  for (auto reason : {agent::post_failure::unreachable, agent::post_failure::credentials,
                      agent::post_failure::endpoint, agent::post_failure::too_large,
                      agent::post_failure::overloaded})
    failures.sample(
      static_cast<double>(e.failures_by.at(static_cast<std::size_t>(reason))),
      {{"reason", std::string(agent::to_string(reason))}});
  out.push_back(failures.build());
  gauge(out, "vigil_agent_last_send_success_timestamp_seconds",
        "when the control plane last accepted a batch (Unix time; 0: not since the "
        "agent started)",
        unix_time(f.last_accepted));
  gauge(out, "vigil_agent_spool_depth", "events waiting in the disk spool",
        static_cast<double>(f.spool_depth));
  gauge(out, "vigil_agent_spool_bytes", "bytes of the events in the disk spool",
        static_cast<double>(f.spool_bytes));
  gauge(out, "vigil_agent_memory_queue_depth", "events queued in memory for a batch",
        static_cast<double>(f.memory_depth));
  gauge(out, "vigil_agent_spooling",
        "1 while new events go to the spool (the control plane was away)",
        f.spooling ? 1 : 0);
  const auto& h = f.heartbeats;
  out.push_back(
    metrics::family_builder("vigil_agent_heartbeats_total",
                            "heartbeats to the control plane by outcome (skipped: due "
                            "while the previous one was still out)",
                            MetricType::Counter)
      .sample(static_cast<double>(h.accepted), {{"outcome", "accepted"}})
      .sample(static_cast<double>(h.failed), {{"outcome", "failed"}})
      .sample(static_cast<double>(h.skipped), {{"outcome", "skipped"}})
      .build());
  gauge(out, "vigil_agent_last_heartbeat_success_timestamp_seconds",
        "when the control plane last accepted a heartbeat (Unix time; 0: not since "
        "the agent started)",
        unix_time(h.last_accepted));
}

void render_monitors(metrics::family_list& out, const agent_snapshot& s) {
  const std::pair<const char*, const std::optional<agent::monitor_figures>*> monitors[] =
    {{"xid_monitor", &s.xid_monitor},
     {"nic_monitor", &s.nic_monitor},
     {"dcgm_monitor", &s.dcgm_monitor},
     {"fabric_monitor", &s.fabric_monitor}};
  auto each = [&](const char* name, MetricType type, const char* help, auto value) {
    metrics::family_builder family(name, help, type);
    for (const auto& [monitor, figures] : monitors)
      if (*figures)
        family.sample(static_cast<double>(value(**figures)), {{"monitor", monitor}});
    out.push_back(family.build());
  };
  each("vigil_agent_polls_total", MetricType::Counter, "poll cycles by monitor",
       [](const agent::monitor_figures& m) { return m.polls; });
  each("vigil_agent_last_poll_timestamp_seconds", MetricType::Gauge,
       "when each monitor last polled (Unix time)",
       [](const agent::monitor_figures& m) { return unix_time(m.last_poll); });
  each("vigil_agent_monitor_events_total", MetricType::Counter,
       "HealthEvents each monitor handed to the forwarder",
       [](const agent::monitor_figures& m) { return m.events; });
  if (s.xid_monitor) {
    counter(out, "vigil_agent_kernel_log_lines_total", "kernel-log lines read",
            s.xid_monitor->lines);
    counter(out, "vigil_agent_malformed_kernel_log_lines_total",
            "NVIDIA kernel-log lines that did not parse", s.xid_monitor->malformed);
  }
  if (s.dcgm_monitor)
    counter(out, "vigil_agent_dcgm_lines_skipped_total",
            "dcgm-exporter page lines that were not valid samples",
            s.dcgm_monitor->malformed);
}

std::string describe(caf::timespan t) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t).count())
         + " ms";
}

// Asks every component at once; `done` runs once all have answered or failed.
void gather(agent_endpoints_actor* self, std::function<void(agent_snapshot&)> done) {
  const auto& c = self->state.components;
  const auto timeout = self->state.ask_timeout;
  auto snapshot = std::make_shared<agent_snapshot>();
  auto pending = std::make_shared<int>(0);
  auto finish = [=] {
    if (--*pending == 0)
      done(*snapshot);
  };
  auto silent = [=](const char* name) {
    return [=](const caf::error& err) {
      snapshot->silent[name] =
        err == caf::sec::request_timeout ? "did not answer within " + describe(timeout)
        : err == caf::sec::request_receiver_down ? "stopped"
                                                 : self->system().render(err);
      finish();
    };
  };
  auto ask_monitor = [&](const caf::actor& monitor, const char* name,
                         std::optional<agent::monitor_figures> agent_snapshot::*slot) {
    if (!monitor)
      return;
    ++*pending;
    self->request(monitor, timeout, figures_atom::value)
      .then(
        [=](const agent::monitor_figures& figures) {
          (*snapshot).*slot = figures;
          finish();
        },
        silent(name));
  };
  ++*pending; // until every request is out
  if (c.forwarder) {
    ++*pending;
    self->request(c.forwarder, timeout, figures_atom::value)
      .then(
        [=](const agent::forwarder_figures& figures) {
          snapshot->forwarder = figures;
          finish();
        },
        silent("forwarder"));
  }
  ask_monitor(c.xid_monitor, "xid_monitor", &agent_snapshot::xid_monitor);
  ask_monitor(c.nic_monitor, "nic_monitor", &agent_snapshot::nic_monitor);
  ask_monitor(c.dcgm_monitor, "dcgm_monitor", &agent_snapshot::dcgm_monitor);
  ask_monitor(c.fabric_monitor, "fabric_monitor", &agent_snapshot::fabric_monitor);
  finish();
}

} // namespace

health_verdict judge_agent_health(const agent_snapshot& snapshot) {
  if (snapshot.silent.empty()) {
    std::string running;
    for (const auto& [name, present] :
         {std::pair{"forwarder", snapshot.forwarder.has_value()},
          {"xid_monitor", snapshot.xid_monitor.has_value()},
          {"nic_monitor", snapshot.nic_monitor.has_value()},
          {"dcgm_monitor", snapshot.dcgm_monitor.has_value()},
          {"fabric_monitor", snapshot.fabric_monitor.has_value()}})
      if (present)
        running += (running.empty() ? "" : ", ") + std::string(name);
    return {200, "ok: " + running + "\n"};
  }
  std::string body = "not running:";
  for (const auto& [name, why] : snapshot.silent)
    body += " " + name + " (" + why + ");";
  body.back() = '\n';
  return {503, body};
}

std::string render_agent_metrics(const agent_snapshot& snapshot) {
  metrics::family_list out;
  metrics::family_builder up(
    "vigil_agent_component_up",
    "1 when the component answered this scrape, 0 when it did not", MetricType::Gauge);
  for (const auto& [name, present] :
       {std::pair{"forwarder", snapshot.forwarder.has_value()},
        {"xid_monitor", snapshot.xid_monitor.has_value()},
        {"nic_monitor", snapshot.nic_monitor.has_value()},
        {"dcgm_monitor", snapshot.dcgm_monitor.has_value()},
        {"fabric_monitor", snapshot.fabric_monitor.has_value()}}) {
    const bool silent = snapshot.silent.count(name) > 0;
    if (present || silent)
      up.sample(present ? 1 : 0, {{"component", name}});
  }
  out.push_back(up.build());
  if (snapshot.forwarder)
    render_forwarder(out, *snapshot.forwarder);
  if (snapshot.xid_monitor || snapshot.nic_monitor || snapshot.dcgm_monitor
      || snapshot.fabric_monitor)
    render_monitors(out, snapshot);
  return metrics::exposition(out);
}

caf::behavior agent_endpoints(agent_endpoints_actor* self, agent_components components,
                              caf::timespan ask_timeout) {
  self->state.components = std::move(components);
  self->state.ask_timeout = ask_timeout;
  return {
    [=](health_atom, http_reply& reply) {
      gather(self, [send = std::move(reply.send)](agent_snapshot& snapshot) {
        auto verdict = judge_agent_health(snapshot);
        send(text(verdict.status, std::move(verdict.body)));
      });
    },
    [=](metrics_atom, http_reply& reply) {
      gather(self, [send = std::move(reply.send)](agent_snapshot& snapshot) {
        auto r = text(200, render_agent_metrics(snapshot));
        r.content_type = metrics::content_type;
        send(std::move(r));
      });
    },
  };
}

http::handler make_agent_handler(caf::actor endpoints) {
  return [endpoints](http::request req, http::responder reply) {
    if (req.path == "/healthz")
      return caf::anon_send(endpoints, health_atom::value, http_reply{std::move(reply)});
    if (req.path == "/metrics")
      return caf::anon_send(endpoints, metrics_atom::value, http_reply{std::move(reply)});
    reply(text(404, "no such endpoint: " + req.path + "\n"));
  };
}

} // namespace vigil
