#include "runtime/sim/cluster_simulator.hpp"

#include <sstream>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/agent/xid/parse_kernel_log.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/protocol/atoms.hpp"
#include "actors/protocol/control_messages.hpp"
#include "messages/json_path.hpp"
#include "runtime/logging.hpp"

namespace vigil::demo {

namespace {

using kube::json;
using acked_atom = caf::atom_constant<caf::atom("acked")>;

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("cluster");
}

std::string minutes_text(std::chrono::seconds d) {
  return std::to_string(d.count() / 60) + "m" + std::to_string(d.count() % 60) + "s";
}

// "[ 3600.000000] " for a kernel timestamp `since_boot` after boot.
std::string kernel_stamp(std::chrono::nanoseconds since_boot) {
  char text[48];
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(since_boot);
  std::snprintf(text, sizeof text, "[%6lld.%06lld] ",
                static_cast<long long>(micros.count() / 1000000),
                static_cast<long long>(micros.count() % 1000000));
  return text;
}

// The agent's forwarder, without HTTP: NDJSON through the ingest decoder and
// into the ingest actor, which journals before it answers.
void post_events(cluster_simulator_actor* self, const std::vector<health_event>& events) {
  if (events.empty())
    return;
  std::string body;
  for (const auto& e : events)
    body += encode_health_event(e) + "\n";
  auto items = control::parse_ingest_body(body, "application/x-ndjson", {});
  if (!items) {
    logger()->error("agent: the ingest decoder refused a batch: {}",
                    items.error().to_string());
    return;
  }
  self->state.record->events_sent += events.size();
  caf::actor me = caf::actor_cast<caf::actor>(self);
  const auto count = static_cast<std::uint64_t>(events.size());
  ingest_request request{std::move(*items), [me, count](control::ingest_reply reply) {
                           caf::anon_send(me, acked_atom::value,
                                          reply.http_status == 200 ? count : 0);
                         }};
  self->send(self->state.ingest, ingest_atom::value, std::move(request));
}

// The node's XID monitor: kernel-log lines through the real parser.
void log_kernel_lines(cluster_simulator_actor* self, int node, const std::string& lines) {
  auto& st = self->state;
  auto& agent = st.agents.at(node);
  const auto now = st.time->wall_now();
  std::string stamped;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);)
    stamped += kernel_stamp(now - agent.boot_time) + line + "\n";
  agent::parse_options options;
  options.catalog = st.catalog;
  options.node_name = node_name(node);
  options.boot_id = boot_id(node, agent.boots);
  options.boot_time = agent.boot_time;
  options.metadata = agent.metadata;
  std::istringstream log(stamped);
  auto parsed = agent::parse_kernel_log(log, options);
  for (const auto& e : parsed.events) {
    std::string codes;
    for (const auto& c : e.error_codes)
      codes += (codes.empty() ? "" : ",") + c;
    logger()->info("agent {}: {} {} → {}{}", node_name(node), e.check_name, codes,
                   to_string(e.action), e.is_healthy ? " (healthy)" : "");
  }
  post_events(self, parsed.events);
}

// The node's NIC monitor: one poll over the node's InfiniBand ports.
void poll_nics(cluster_simulator_actor* self, int node) {
  auto& st = self->state;
  auto& agent = st.agents.at(node);
  if (!agent.nic) {
    agent::nic_monitor_options options;
    options.node_name = node_name(node);
    auto poller = agent::nic_poller::start(options, agent.metadata, "", std::nullopt);
    if (!poller) {
      logger()->error("agent {}: the NIC monitor did not start: {}", node_name(node),
                      poller.error().to_string());
      return;
    }
    agent.nic.emplace(std::move(*poller));
  }
  auto result = agent.nic->poll(agent::read_nic_snapshot(agent.host->root()),
                                boot_id(node, agent.boots), st.time->wall_now());
  for (const auto& e : result.events)
    if (!result.baseline)
      logger()->info("agent {}: {} {}", node_name(node), e.check_name, e.message);
  post_events(self, result.events);
}

// The kubelet: pods in their grace period go (evicted workload pods are
// recorded for the summary).
void kubelet_pass(cluster_simulator_actor* self, kube::object_store& store) {
  const auto* pods = store.find_type("", "v1", "pods");
  for (const auto& [ns, name] : store.terminating_pods()) {
    auto pod = store.get(*pods, ns, name);
    if (pod.ok()
        && json_text(*pod.value, {"metadata", "labels", "vigil-demo/workload"})
             == "true") {
      const auto node = json_text(*pod.value, {"spec", "nodeName"});
      self->state.record->evictions.push_back({ns, name, node});
      logger()->info("kubelet {}: pod {}/{} stopped", node, ns, name);
    }
    store.finish_pod_deletion(ns, name);
  }
}

// The GPU operator: an operand runs on a node exactly while its deploy label
// is "true" (seed 001 step 1).
void operator_pass(kube::object_store& store) {
  const auto* nodes = store.find_type("", "v1", "nodes");
  const auto* pods = store.find_type("", "v1", "pods");
  auto listed = store.list(*nodes, "", {});
  if (!listed.ok())
    return;
  for (const auto& node : (*listed.value)["items"]) {
    const auto name = json_text(node, {"metadata", "name"});
    const json* labels = json_at(node, {"metadata", "labels"});
    if (labels == nullptr || !labels->is_object())
      continue;
    for (const auto& [label, value] : labels->items()) {
      const auto app = operand_of_deploy_label(label);
      if (app.empty() || !value.is_string())
        continue;
      const auto pod_name = app + "-" + name;
      const bool present = store.get(*pods, operator_namespace, pod_name).ok();
      if (value == "false" && present) {
        store.remove(*pods, operator_namespace, pod_name, {});
        logger()->info("GPU operator: {} removed from {}", app, name);
      } else if (value == "true" && !present) {
        store.create(*pods, operator_namespace, operand_pod(app, pod_name, name));
        logger()->info("GPU operator: {} running again on {}", app, name);
      }
    }
  }
}

json job_status(bool succeeded) {
  if (succeeded)
    return {{"succeeded", 1},
            {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}};
  return {
    {"failed", 1},
    {"conditions",
     {{{"type", "Failed"}, {"status", "True"}, {"reason", "BackoffLimitExceeded"}}}}};
}

// The pod the Job controller makes from the Job: its template's labels,
// job-name, and an ownerReference to the Job, as Kubernetes sets them.
json job_pod(const json& job, const std::string& node) {
  const auto name = json_text(job, {"metadata", "name"});
  json labels = json::object();
  if (const json* l = json_at(job, {"spec", "template", "metadata", "labels"});
      l && l->is_object())
    labels = *l;
  labels["job-name"] = name;
  json owner = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"name", name},
                {"uid", json_text(job, {"metadata", "uid"})},
                {"controller", true}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name + "-pod"}, {"labels", labels}, {"ownerReferences", {owner}}}},
          {"spec", {{"nodeName", node}, {"containers", {{{"name", "job"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

// A new Job of the janitor starts: its pod runs until the drawn duration is over.
void start_job(cluster_simulator_actor* self, kube::object_store& store,
               const json& job) {
  auto& st = self->state;
  simulated_job j;
  j.name = json_text(job, {"metadata", "name"});
  const auto node = json_text(job, {"spec", "template", "spec", "nodeName"});
  j.node = node_number(node);
  j.reboot = json_at(job, {"metadata", "labels", "vigil.dev/reboot-node"}) != nullptr;
  j.validation = json_at(job, {"metadata", "labels", "vigil.dev/validation"}) != nullptr;
  j.bug_report = json_at(job, {"metadata", "labels", "vigil.dev/bug-report"}) != nullptr;
  if (const json* containers = json_at(job, {"spec", "template", "spec", "containers"});
      containers && containers->is_array() && !containers->empty())
    if (const json* env = json_at((*containers)[0], {"env"}); env && env->is_array())
      for (const auto& e : *env)
        if (e.value("name", "") == "GPU_UUID")
          j.gpu_uuid = e.value("value", "");
  const auto duration =
    j.reboot ? draw_duration(st.dice, st.settings.reboot_min, st.settings.reboot_max)
    : j.validation
      ? draw_duration(st.dice, st.settings.validation_min, st.settings.validation_max)
    : j.bug_report
      ? draw_duration(st.dice, st.settings.bug_report_min, st.settings.bug_report_max)
      : draw_duration(st.dice, st.settings.reset_min, st.settings.reset_max);
  j.due = st.time->now() + duration;
  j.fails = j.validation ? st.failing_validations.erase(j.node) > 0
                         : !j.reboot && !j.bug_report
                             && st.failing_resets.erase({j.node, j.gpu_uuid}) > 0;
  const auto* pods = store.find_type("", "v1", "pods");
  const auto* jobs = store.find_type("batch", "v1", "jobs");
  store.create(*pods, janitor_namespace, job_pod(job, node));
  store.patch(*jobs, janitor_namespace, j.name, json{{"status", {{"active", 1}}}},
              kube::patch_type::merge, true);
  if (j.reboot) {
    ++st.record->reboot_jobs;
    // The node goes NotReady for the length of the reboot.
    store.patch(
      *store.find_type("", "v1", "nodes"), "", node,
      json{{"status",
            {{"conditions",
              {{{"type", "Ready"}, {"status", "False"}, {"reason", "NodeRebooting"}}}}}}},
      kube::patch_type::strategic_merge, true);
    logger()->info("Job {}: {} reboots (back in {})", j.name, node,
                   minutes_text(duration));
  } else if (j.validation) {
    logger()->info("Job {}: validating {} ({})", j.name, node, minutes_text(duration));
  } else if (j.bug_report) {
    logger()->info("Job {}: nvidia-bug-report.sh on {} ({})", j.name, node,
                   minutes_text(duration));
  } else {
    ++st.record->reset_jobs;
    logger()->info("Job {}: resetting {} on {} ({})", j.name, j.gpu_uuid, node,
                   minutes_text(duration));
  }
  st.jobs.emplace(j.name, j);
}

// A Job's time is up: the reset ends (and the driver logs it), or the node is
// back with a new boot ID.
void finish_job(cluster_simulator_actor* self, kube::object_store& store,
                const simulated_job& j) {
  auto& st = self->state;
  const auto* pods = store.find_type("", "v1", "pods");
  const auto* jobs = store.find_type("batch", "v1", "jobs");
  const int exit_code = j.fails ? 2 : 0;
  store.patch(
    *pods, janitor_namespace, j.name + "-pod",
    json{
      {"status",
       {{"phase", j.fails ? "Failed" : "Succeeded"},
        {"containerStatuses",
         {{{"name", "job"}, {"state", {{"terminated", {{"exitCode", exit_code}}}}}}}}}}},
    kube::patch_type::merge, true);
  store.patch(*jobs, janitor_namespace, j.name, json{{"status", job_status(!j.fails)}},
              kube::patch_type::merge, true);
  if (!j.reboot) {
    logger()->info("Job {}: {} (exit {})", j.name, j.fails ? "failed" : "done",
                   exit_code);
    return;
  }
  auto found = st.agents.find(j.node);
  if (found == st.agents.end()) { // a node someone added by hand: no host behind it
    logger()->warn("Job {}: node {} is not simulated; nothing rebooted", j.name, j.node);
    return;
  }
  // The host comes back: a new boot, its NICs' counters and agent start over.
  auto& agent = found->second;
  ++agent.boots;
  agent.boot_time = st.time->wall_now();
  agent.down_ports.clear();
  std::fill(agent.link_downed.begin(), agent.link_downed.end(), 0);
  for (int n = 0; n < st.settings.spec.nics_per_node; ++n)
    set_port_state(*agent.host, n, true, 0);
  agent.nic.reset();
  store.patch(
    *store.find_type("", "v1", "nodes"), "", node_name(j.node),
    json{{"status",
          {{"nodeInfo", {{"bootID", boot_id(j.node, agent.boots)}}},
           {"conditions",
            {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}}}}},
    kube::patch_type::strategic_merge, true);
  logger()->info("{} is back: Ready, boot ID {}", node_name(j.node),
                 boot_id(j.node, agent.boots));
}

// What a pass of the Job controller leaves for the agents.
struct finished_jobs {
  std::vector<std::pair<int, std::string>> resets; ///< (node, GPU UUID)
  std::vector<int> reboots;
};

void jobs_pass(cluster_simulator_actor* self, kube::object_store& store,
               finished_jobs& finished) {
  auto& st = self->state;
  const auto* jobs = store.find_type("batch", "v1", "jobs");
  auto listed = store.list(*jobs, janitor_namespace, {});
  std::set<std::string> present;
  if (listed.ok())
    for (const auto& job : (*listed.value)["items"]) {
      const auto name = json_text(job, {"metadata", "name"});
      present.insert(name);
      if (st.jobs.count(name) == 0 && json_at(job, {"status", "conditions"}) == nullptr)
        start_job(self, store, job);
    }
  for (auto it = st.jobs.begin(); it != st.jobs.end();) {
    if (present.count(it->first) == 0) { // deleted by the janitor
      it = st.jobs.erase(it);
      continue;
    }
    if (it->second.finished || it->second.due > st.time->now()) {
      ++it;
      continue;
    }
    finish_job(self, store, it->second);
    const bool simulated = st.agents.count(it->second.node) > 0;
    if (simulated && it->second.reboot)
      finished.reboots.push_back(it->second.node);
    else if (simulated && !it->second.fails && !it->second.validation
             && !it->second.bug_report)
      finished.resets.emplace_back(it->second.node, it->second.gpu_uuid);
    it->second.finished = true; // forgotten when the janitor deletes the Job
    ++it;
  }
}

} // namespace

std::chrono::seconds draw_duration(std::mt19937_64& dice, std::chrono::seconds low,
                                   std::chrono::seconds high) {
  if (high <= low)
    return low;
  const auto span = static_cast<std::uint64_t>((high - low).count()) + 1;
  return low + std::chrono::seconds{static_cast<std::int64_t>(dice() % span)};
}

caf::behavior cluster_simulator(cluster_simulator_actor* self,
                                simulator_settings settings, store_access access,
                                caf::actor ingest, agent::xid_catalog catalog,
                                std::shared_ptr<const clock> time,
                                std::shared_ptr<simulation_record> record) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.access = std::move(access);
  st.ingest = std::move(ingest);
  st.catalog = std::move(catalog);
  st.time = std::move(time);
  st.record = std::move(record);
  st.dice.seed(st.settings.seed);
  try {
    for (int n = 1; n <= st.settings.spec.nodes; ++n) {
      node_agent agent;
      agent.metadata = node_metadata(st.settings.spec, n);
      agent.link_downed.assign(static_cast<std::size_t>(st.settings.spec.nics_per_node),
                               0);
      agent.host = std::make_unique<fake_sysfs>();
      add_compute_nics(*agent.host, st.settings.spec);
      agent.boot_time = st.time->wall_now() - std::chrono::hours{24};
      st.agents.emplace(n, std::move(agent));
    }
  } catch (const std::exception& e) { // temp_dir and fake_sysfs throw
    st.record->failure =
      std::string("cannot write the simulated hosts' sysfs trees: ") + e.what();
    self->quit(caf::make_error(caf::sec::runtime_error, st.record->failure));
    return {};
  }
  for (int n = 1; n <= st.settings.spec.nodes; ++n)
    poll_nics(self, n); // the baseline: every port healthy
  self->send(self, simtick_atom::value);
  return {
    [=](simtick_atom) {
      auto& st = self->state;
      finished_jobs finished;
      st.access([&](kube::object_store& store) {
        kubelet_pass(self, store);
        operator_pass(store);
        jobs_pass(self, store, finished);
      });
      // The reset script's last words, read by the agent (seed 001 step 4).
      for (const auto& [node, uuid] : finished.resets)
        log_kernel_lines(self, node, gpu_reset_line(uuid));
      // A rebooted host's NIC monitor starts again: its first poll.
      for (int node : finished.reboots)
        poll_nics(self, node);
      self->delayed_send(self, st.settings.tick, simtick_atom::value);
    },
    [=](xid_atom, int node, int gpu, const std::vector<int>& codes) {
      if (self->state.agents.count(node) == 0)
        return;
      std::string lines;
      for (int code : codes)
        lines += xid_line(gpu, code);
      log_kernel_lines(self, node, lines);
    },
    [=](nic_atom, int node, int nic, bool up) {
      auto& st = self->state;
      auto it = st.agents.find(node);
      if (it == st.agents.end() || nic < 0 || nic >= st.settings.spec.nics_per_node)
        return;
      auto& ports = it->second.down_ports;
      auto pos = std::find(ports.begin(), ports.end(), nic);
      auto& downs = it->second.link_downed[static_cast<std::size_t>(nic)];
      if (!up && pos == ports.end()) {
        ports.push_back(nic);
        ++downs;
      } else if (up && pos != ports.end()) {
        ports.erase(pos);
      }
      set_port_state(*it->second.host, nic, up, downs);
      poll_nics(self, node);
    },
    [=](failreset_atom, int node, int gpu) {
      self->state.failing_resets.emplace(node, gpu_uuid(node, gpu));
    },
    [=](failvalid_atom, int node) { self->state.failing_validations.insert(node); },
    [=](summary_atom, int node) -> std::string {
      // The node's InfiniBand ports as its agent last read them.
      auto it = self->state.agents.find(node);
      json ports = json::array();
      if (it != self->state.agents.end())
        for (int n = 0; n < self->state.settings.spec.nics_per_node; ++n) {
          const auto& down = it->second.down_ports;
          ports.push_back(
            {{"nic", nic_name(n)},
             {"port", 1},
             {"state",
              std::find(down.begin(), down.end(), n) == down.end() ? "ACTIVE" : "DOWN"},
             {"linkDowned", it->second.link_downed[static_cast<std::size_t>(n)]}});
        }
      return ports.dump();
    },
    [=](acked_atom, std::uint64_t count) {
      self->state.record->events_acknowledged += count;
    },
  };
}

} // namespace vigil::demo
