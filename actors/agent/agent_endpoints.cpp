#include "actors/agent/agent_endpoints.hpp"

#include <functional>
#include <memory>
#include <utility>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

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

void family(std::string& out, const char* name, const char* type, const char* help) {
  out +=
    std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const char* name, const std::string& labels,
            std::uint64_t value) {
  out += name + labels + " " + std::to_string(value) + "\n";
}

void sample(std::string& out, const char* name, const std::string& labels, double value) {
  out += name + labels + " " + nlohmann::json(value).dump() + "\n";
}

void counter(std::string& out, const char* name, const char* help, std::uint64_t value) {
  family(out, name, "counter", help);
  sample(out, name, "", value);
}

void gauge(std::string& out, const char* name, const char* help, std::uint64_t value) {
  family(out, name, "gauge", help);
  sample(out, name, "", value);
}

// Unix seconds, 0 for "never".
double unix_time(const std::optional<wall_time>& t) {
  if (!t)
    return 0;
  return static_cast<double>(unix_seconds(*t)) + unix_nanos(*t) / 1e9;
}

std::string label(const char* key, const std::string& value) {
  return std::string("{") + key + "=\"" + value + "\"}";
}

void render_forwarder(std::string& out, const agent::forwarder_figures& f) {
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
  counter(out, "vigil_agent_send_failures_total",
          "batch POSTs that failed and are retried (the events wait in the spool)",
          e.failures);
  family(out, "vigil_agent_last_send_success_timestamp_seconds", "gauge",
         "when the control plane last accepted a batch (Unix time; 0: not since the "
         "agent started)");
  sample(out, "vigil_agent_last_send_success_timestamp_seconds", "",
         unix_time(f.last_accepted));
  gauge(out, "vigil_agent_spool_depth", "events waiting in the disk spool",
        f.spool_depth);
  gauge(out, "vigil_agent_spool_bytes", "bytes of the events in the disk spool",
        f.spool_bytes);
  gauge(out, "vigil_agent_memory_queue_depth", "events queued in memory for a batch",
        f.memory_depth);
  gauge(out, "vigil_agent_spooling",
        "1 while new events go to the spool (the control plane was away)",
        f.spooling ? 1 : 0);
  const auto& h = f.heartbeats;
  family(out, "vigil_agent_heartbeats_total", "counter",
         "heartbeats to the control plane by outcome (skipped: due while the previous "
         "one was still out)");
  sample(out, "vigil_agent_heartbeats_total", label("outcome", "accepted"), h.accepted);
  sample(out, "vigil_agent_heartbeats_total", label("outcome", "failed"), h.failed);
  sample(out, "vigil_agent_heartbeats_total", label("outcome", "skipped"), h.skipped);
  family(out, "vigil_agent_last_heartbeat_success_timestamp_seconds", "gauge",
         "when the control plane last accepted a heartbeat (Unix time; 0: not since "
         "the agent started)");
  sample(out, "vigil_agent_last_heartbeat_success_timestamp_seconds", "",
         unix_time(h.last_accepted));
}

void render_monitors(std::string& out, const agent_snapshot& s) {
  const std::pair<const char*, const std::optional<agent::monitor_figures>*> monitors[] =
    {{"xid_monitor", &s.xid_monitor}, {"nic_monitor", &s.nic_monitor}};
  auto each = [&](const char* name, const char* type, const char* help, auto value) {
    family(out, name, type, help);
    for (const auto& [monitor, figures] : monitors)
      if (*figures)
        sample(out, name, label("monitor", monitor), value(**figures));
  };
  each("vigil_agent_polls_total", "counter", "poll cycles by monitor",
       [](const agent::monitor_figures& m) { return m.polls; });
  each("vigil_agent_last_poll_timestamp_seconds", "gauge",
       "when each monitor last polled (Unix time)",
       [](const agent::monitor_figures& m) { return unix_time(m.last_poll); });
  each("vigil_agent_monitor_events_total", "counter",
       "HealthEvents each monitor handed to the forwarder",
       [](const agent::monitor_figures& m) { return m.events; });
  if (s.xid_monitor) {
    counter(out, "vigil_agent_kernel_log_lines_total", "kernel-log lines read",
            s.xid_monitor->lines);
    counter(out, "vigil_agent_malformed_kernel_log_lines_total",
            "NVIDIA kernel-log lines that did not parse", s.xid_monitor->malformed);
  }
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
  finish();
}

} // namespace

health_verdict judge_agent_health(const agent_snapshot& snapshot) {
  if (snapshot.silent.empty()) {
    std::string running;
    for (const auto& [name, present] :
         {std::pair{"forwarder", snapshot.forwarder.has_value()},
          {"xid_monitor", snapshot.xid_monitor.has_value()},
          {"nic_monitor", snapshot.nic_monitor.has_value()}})
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
  std::string out;
  family(out, "vigil_agent_component_up", "gauge",
         "1 when the component answered this scrape, 0 when it did not");
  for (const auto& [name, present] :
       {std::pair{"forwarder", snapshot.forwarder.has_value()},
        {"xid_monitor", snapshot.xid_monitor.has_value()},
        {"nic_monitor", snapshot.nic_monitor.has_value()}}) {
    const bool silent = snapshot.silent.count(name) > 0;
    if (present || silent)
      sample(out, "vigil_agent_component_up", label("component", name),
             std::uint64_t{present ? 1u : 0u});
  }
  if (snapshot.forwarder)
    render_forwarder(out, *snapshot.forwarder);
  if (snapshot.xid_monitor || snapshot.nic_monitor)
    render_monitors(out, snapshot);
  return out;
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
        send(text(200, render_agent_metrics(snapshot)));
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
