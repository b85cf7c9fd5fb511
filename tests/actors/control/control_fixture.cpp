// Out-of-line helpers of control_fixture.hpp: the gateway stand-in and the
// events, pods and Nodes the control actor tests are made of.
#include "tests/actors/control/control_fixture.hpp"

#include <sstream>
#include <utility>

#include "runtime/sim/kube/kube_rest.hpp"

namespace vigil::test {

namespace {

const control::taint gpu_taint{"vigil.dev/gpu-fault", "true",
                               control::taint_effect::no_schedule};

kube::kube_result to_result(const kube::store_result& r, long ok_status) {
  if (r.ok())
    return kube::kube_response{ok_status, r.value->dump()};
  kube::kube_error e;
  e.status = r.error.code;
  e.reason = r.error.reason;
  e.message = r.error.message;
  return e;
}

// "spec.nodeName%3Dnode-1" → "spec.nodeName=node-1": the escapes vigil sends.
std::string unescape(std::string text) {
  for (auto [from, to] : {std::pair<const char*, const char*>{"%3D", "="}, {"%2C", ","}})
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from))
      text.replace(at, 3, to);
  return text;
}

// GET /api/v1/pods?fieldSelector=…, POST …/pods/<name>/eviction, DELETE …/pods/<name>.
kube::kube_result pod_request(kube::object_store& store,
                              const kube::kube_request& request) {
  const auto* pods = store.find_type("", "v1", "pods");
  if (request.verb == "GET" && request.path == "/api/v1/pods") {
    kube::list_options options;
    const std::string field = "fieldSelector=";
    if (request.query.rfind(field, 0) == 0)
      options.field_selector = unescape(request.query.substr(field.size()));
    return to_result(store.list(*pods, "", options), 200);
  }
  // /api/v1/namespaces/<ns>/pods/<name>[/eviction]
  std::vector<std::string> parts;
  std::string part;
  for (char c : request.path.substr(1) + "/")
    if (c == '/') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  if (parts.size() >= 6 && parts[2] == "namespaces" && parts[4] == "pods") {
    if (request.verb == "POST" && parts.size() == 7 && parts[6] == "eviction")
      return to_result(store.evict(parts[3], parts[5], json::parse(request.body)), 201);
    if (request.verb == "DELETE" && parts.size() == 6)
      return to_result(store.remove(*pods, parts[3], parts[5], {}), 200);
  }
  // /apis/<group>/<version>/<plural>[/<name>[/status]]: the maintenance CRs,
  // vigil.dev's and the operators' own kinds (remediation.custom_actions):
  // every group that is not one of Kubernetes' own.
  if (parts.size() >= 4 && parts[0] == "apis" && parts[3] != "namespaces"
      && parts[1].find("k8s.io") == std::string::npos && parts[1] != "batch"
      && parts[1] != "policy") {
    const auto* type = store.find_type(parts[1], parts[2], parts[3]);
    if (type == nullptr)
      return kube::kube_error{
        404, "NotFound", "the server could not find the requested resource", {}};
    if (request.verb == "POST" && parts.size() == 4)
      return to_result(store.create(*type, "", json::parse(request.body)), 201);
    if (request.verb == "GET" && parts.size() == 4)
      return to_result(store.list(*type, "", {}), 200);
    if (request.verb == "GET" && parts.size() == 5)
      return to_result(store.get(*type, "", parts[4]), 200);
    if (request.verb == "PATCH" && parts.size() >= 5)
      return to_result(store.patch(*type, "", parts[4], json::parse(request.body),
                                   kube::patch_type::merge, parts.size() == 6),
                       200);
  }
  // /apis/batch/v1/namespaces/<ns>/jobs[/<name>]
  if (parts.size() >= 6 && parts[0] == "apis" && parts[1] == "batch"
      && parts[5] == "jobs") {
    const auto* jobs = store.find_type("batch", "v1", "jobs");
    if (request.verb == "POST" && parts.size() == 6)
      return to_result(store.create(*jobs, parts[4], json::parse(request.body)), 201);
    if (request.verb == "GET" && parts.size() == 7)
      return to_result(store.get(*jobs, parts[4], parts[6]), 200);
    if (request.verb == "DELETE" && parts.size() == 7)
      return to_result(store.remove(*jobs, parts[4], parts[6], {}), 200);
  }
  // /api/v1/namespaces/<ns>/pods?labelSelector=…: a Job's pods
  if (request.verb == "GET" && parts.size() == 5 && parts[2] == "namespaces"
      && parts[4] == "pods") {
    kube::list_options options;
    const std::string label = "labelSelector=";
    if (request.query.rfind(label, 0) == 0)
      options.label_selector = unescape(request.query.substr(label.size()));
    return to_result(store.list(*pods, parts[3], options), 200);
  }
  // /apis/coordination.k8s.io/v1/namespaces/<ns>/leases[/<name>]
  if (parts.size() >= 6 && parts[0] == "apis" && parts[1] == "coordination.k8s.io"
      && parts[5] == "leases") {
    const auto* leases = store.find_type("coordination.k8s.io", "v1", "leases");
    if (request.verb == "POST")
      return to_result(store.create(*leases, parts[4], json::parse(request.body)), 201);
    if (request.verb == "GET" && parts.size() == 7)
      return to_result(store.get(*leases, parts[4], parts[6]), 200);
    if (request.verb == "GET" && parts.size() == 6) // the shard elector's list
      return to_result(store.list(*leases, parts[4], {}), 200);
    if (request.verb == "PUT" && parts.size() == 7)
      return to_result(
        store.update(*leases, parts[4], parts[6], json::parse(request.body), false), 200);
  }
  // Dynamic Resource Allocation's objects and TokenReviews, answered as the
  // API test server answers them.
  if (request.path.rfind("/apis/resource.k8s.io/", 0) == 0
      || request.path.rfind("/apis/authentication.k8s.io/", 0) == 0) {
    kube::rest_request rest;
    rest.verb = request.verb;
    rest.path = request.path;
    rest.body = request.body;
    std::istringstream terms(request.query);
    for (std::string term; std::getline(terms, term, '&');)
      if (auto eq = term.find('='); eq != std::string::npos)
        rest.query[term.substr(0, eq)] = unescape(term.substr(eq + 1));
    auto reply = kube::serve_rest(store, rest);
    if (reply.status >= 200 && reply.status < 300)
      return kube::kube_response{reply.status, reply.body};
    return kube::kube_error{reply.status, "NotFound", reply.body, {}};
  }
  kube::kube_error e;
  e.status = 404;
  e.reason = "NotFound";
  return e;
}

} // namespace

kube_gateway_handle::behavior_type
fake_gateway(fake_gateway_actor* self, std::shared_ptr<kube::object_store> store) {
  self->state.store = std::move(store);
  return {
    [=](const kube::kube_request& request) -> kube::kube_result {
      auto& st = self->state;
      st.seen.push_back(request);
      if (!st.fail_next.empty()) {
        kube::kube_error e;
        e.status = st.fail_next.front();
        e.reason = "Injected";
        st.fail_next.erase(st.fail_next.begin());
        return e;
      }
      const auto* nodes = st.store->find_type("", "v1", "nodes");
      const auto* events = st.store->find_type("", "v1", "events");
      const std::string node_prefix = "/api/v1/nodes/";
      if (request.path.rfind(node_prefix, 0) == 0) {
        auto rest = request.path.substr(node_prefix.size());
        bool status = false;
        if (auto slash = rest.find('/'); slash != std::string::npos) {
          status = rest.substr(slash + 1) == "status";
          rest = rest.substr(0, slash);
        }
        if (request.verb == "GET")
          return to_result(st.store->get(*nodes, "", rest), 200);
        auto kind = request.content_type == kube::content_type::merge_patch
                      ? kube::patch_type::merge
                      : kube::patch_type::strategic_merge;
        return to_result(
          st.store->patch(*nodes, "", rest, json::parse(request.body), kind, status),
          200);
      }
      if (request.verb == "POST" && request.path.find("/events") != std::string::npos)
        return to_result(st.store->create(*events, "default", json::parse(request.body)),
                         201);
      return pod_request(*st.store, request);
    },
    [](watch_atom, const kube_watch_spec&) -> result<std::uint64_t> {
      return sec::unexpected_message;
    },
    [](unwatch_atom, std::uint64_t) {},
  };
}

control::quarantine_policy policy() {
  control::quarantine_policy p;
  control::quarantine_rule r;
  r.name = "fatal-gpu";
  r.match.component_classes = {"GPU"};
  r.match.is_fatal = true;
  r.taints = {gpu_taint};
  control::quarantine_rule nic;
  nic.name = "fatal-nic";
  nic.match.component_classes = {"NIC"};
  nic.match.is_fatal = true;
  p.rules = {r, nic};
  return p;
}

health_event xid(const std::string& node, const std::string& uuid, bool healthy) {
  health_event e;
  e.id = node + "-" + uuid + (healthy ? "-recovered" : "-79");
  e.agent = "xid-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = !healthy;
  e.is_healthy = healthy;
  // A recovery names no code, as the agent's "GPU reset occurred" does: it
  // clears every XID of the GPU (one naming a code clears only that code).
  if (!healthy)
    e.error_codes = {"79"};
  e.entities = {{"GPU_UUID", uuid}};
  e.node_name = node;
  return e;
}

health_event reset_needed(const std::string& node, const std::string& uuid) {
  auto e = xid(node, uuid);
  e.id = node + "-" + uuid + "-48";
  e.error_codes = {"48"};
  e.action = recommended_action::component_reset;
  return e;
}

health_event reboot_needed(const std::string& node, const std::string& uuid) {
  auto e = xid(node, uuid);
  e.action = recommended_action::restart_vm;
  return e;
}

json pod_object(const std::string& name, const std::string& node,
                std::vector<std::string> gpus, json labels,
                const std::string& owner_kind) {
  json pod = {
    {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
    {"spec",
     {{"nodeName", node}, {"containers", {{{"name", "main"}, {"image", "trainer"}}}}}},
    {"status",
     {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (!gpus.empty()) {
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
      std::to_string(gpus.size());
    json devices = {
      {"devices", {{{"resourceName", "nvidia.com/gpu"}, {"deviceIds", gpus}}}}};
    pod["metadata"]["annotations"][control::gpu_devices_annotation] = devices.dump();
  }
  if (!owner_kind.empty())
    pod["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                           {"kind", owner_kind},
                                           {"name", "owner"},
                                           {"uid", "owner-uid"},
                                           {"controller", true}}};
  return pod;
}

health_event port_state(const std::string& node, bool up, int n) {
  health_event e;
  e.id = node + "-mlx5_0-1-" + (up ? "up-" : "down-") + std::to_string(n);
  e.agent = "nic-monitor";
  e.component_class = "NIC";
  e.check_name = "InfiniBandStateCheck";
  e.is_fatal = !up;
  e.is_healthy = up;
  e.action = up ? recommended_action::none : recommended_action::restart_vm;
  e.entities = {{"NIC", "mlx5_0"}, {"NICPort", "1"}};
  // What the agent's NIC monitor says of the port (nic_events.cpp).
  e.metadata = {{"state", up ? "ACTIVE" : "DOWN"},
                {"phys_state", up ? "LinkUp" : "Disabled"},
                {"link_layer", "InfiniBand"},
                {"role", "compute"}};
  e.node_name = node;
  return e;
}

json node_object(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.present", "true"},
              {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
          {"spec", json::object()}};
}

} // namespace vigil::test
