#include "actors/control/remediation/remediation_resource.hpp"

#include <cctype>
#include <cstdint>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace vigil::control {

namespace {

using nlohmann::json;

constexpr std::string_view group = "vigil.dev";
constexpr std::string_view version = "v1alpha1";
constexpr std::size_t max_name_length = 253; // a DNS subdomain

// FNV-1a, 64 bit: stable across builds and platforms (std::hash is not).
std::string short_hash(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return std::string(out, 10);
}

// The CR name's first word: a custom kind lower-cased, kept to the letters
// and digits a DNS subdomain allows.
std::string name_prefix(const remediation_plan& plan) {
  switch (plan.kind) {
    case remediation_kind::gpu_reset: return "gpureset";
    case remediation_kind::reboot_node: return "reboot";
    case remediation_kind::terminate_node: return "terminate";
    case remediation_kind::custom: {
      std::string out;
      for (char c : plan.custom ? plan.custom->kind : std::string{})
        if (std::isalnum(static_cast<unsigned char>(c)) != 0)
          out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return out.empty() ? "custom" : out;
    }
    default: return "maintenance";
  }
}

std::string api_version_of(const remediation_plan& plan) {
  if (plan.kind == remediation_kind::custom && plan.custom)
    return plan.custom->group + "/" + plan.custom->version;
  return std::string{group} + "/" + std::string{version};
}

std::string kind_of(const remediation_plan& plan) {
  if (plan.kind == remediation_kind::custom && plan.custom)
    return plan.custom->kind;
  return std::string{to_string(plan.kind)};
}

// The convention of batch/v1 Jobs, which an operator's controller may
// follow instead of a phase: a condition of `type` whose status is True.
bool condition_true(const json& conditions, std::string_view type) {
  if (!conditions.is_array())
    return false;
  auto field_is = [](const json& c, const char* key, std::string_view want) {
    auto it = c.find(key);
    return it != c.end() && it->is_string() && it->get<std::string>() == want;
  };
  for (const auto& c : conditions)
    if (c.is_object() && field_is(c, "type", type) && field_is(c, "status", "True"))
      return true;
  return false;
}

} // namespace

std::optional<kube::api_resource> maintenance_resource(const remediation_plan& plan) {
  kube::api_resource r{std::string{group}, std::string{version}, {}, false};
  switch (plan.kind) {
    case remediation_kind::gpu_reset: r.plural = "gpuresets"; return r;
    case remediation_kind::reboot_node: r.plural = "rebootnodes"; return r;
    case remediation_kind::terminate_node: r.plural = "terminatenodes"; return r;
    case remediation_kind::custom:
      if (!plan.custom)
        return std::nullopt;
      return kube::api_resource{plan.custom->group, plan.custom->version,
                                plan.custom->plural, false};
    default: return std::nullopt;
  }
}

std::string maintenance_cr_name(std::string_view node, const remediation_plan& plan,
                                std::string_view event_id) {
  auto hash = short_hash(plan.group + "/" + std::string{event_id});
  std::string name = name_prefix(plan) + "-" + std::string{node};
  if (name.size() + hash.size() + 1 > max_name_length)
    name.resize(max_name_length - hash.size() - 1);
  while (!name.empty() && (name.back() == '-' || name.back() == '.'))
    name.pop_back();
  return name + "-" + hash;
}

std::string maintenance_cr_body(const std::string& name, std::string_view node,
                                const remediation_plan& plan, std::string_view event_id) {
  json spec = {{"nodeName", node}, {"reason", plan.reason}, {"sourceEventId", event_id}};
  if (plan.kind == remediation_kind::gpu_reset
      || (plan.kind == remediation_kind::custom && !plan.gpu_uuid.empty()))
    spec["gpuUUIDs"] = json::array({plan.gpu_uuid});
  if (plan.kind == remediation_kind::reboot_node && plan.collect_bug_report)
    spec["collectBugReport"] = true;
  if (plan.kind == remediation_kind::custom && plan.custom)
    spec["customAction"] = plan.custom->name;
  json body = {
    {"apiVersion", api_version_of(plan)},
    {"kind", kind_of(plan)},
    {"metadata",
     {{"name", name},
      {"labels", {{"app.kubernetes.io/managed-by", "vigil"}, {"vigil.dev/node", node}}},
      {"annotations", {{"vigil.dev/equivalence-group", plan.group}}}}},
    {"spec", std::move(spec)}};
  return body.dump();
}

kube::kube_request create_cr_request(const remediation_plan& plan,
                                     const std::string& body) {
  return kube::make_request("POST", kube::resource_path(*maintenance_resource(plan)),
                            body);
}

kube::kube_request get_cr_request(const remediation_plan& plan, const std::string& name) {
  return kube::make_request("GET",
                            kube::resource_path(*maintenance_resource(plan), {}, name));
}

expected<cr_progress> read_cr_progress(std::string_view cr_json) {
  auto cr = json::parse(cr_json, nullptr, false);
  if (!cr.is_object())
    return failure{"custom resource", "not a JSON object"};
  if (!cr.contains("metadata") || !cr["metadata"].is_object())
    return failure{"custom resource", "metadata missing"};
  cr_progress out;
  out.phase = "Pending";
  auto status = cr.find("status");
  if (status == cr.end() || !status->is_object())
    return out;
  auto text = [&](const char* key) {
    auto it = status->find(key);
    return it != status->end() && it->is_string() ? it->get<std::string>()
                                                  : std::string{};
  };
  const auto conditions = status->value("conditions", json::array());
  if (auto phase = text("phase"); !phase.empty())
    out.phase = phase;
  else if (condition_true(conditions, "Failed"))
    out.phase = "Failed";
  else if (condition_true(conditions, "Complete"))
    out.phase = "Succeeded";
  out.failure_reason = text("failureReason");
  if (auto started = parse_rfc3339(text("startedAt")))
    out.started_at = *started;
  out.succeeded = out.phase == "Succeeded";
  out.terminal = out.succeeded || out.phase == "Failed";
  if (auto c = status->find("conditions"); c != status->end() && c->is_array())
    for (const auto& condition : *c)
      if (condition.is_object() && condition.contains("message")
          && condition["message"].is_string())
        out.message = condition["message"].get<std::string>();
  return out;
}

kube::kube_request remediation_annotation_request(const std::string& node,
                                                  const remediation_state& state) {
  json value =
    state.groups.empty() ? json(nullptr) : json(encode_remediation_state(state));
  json patch = {
    {"metadata",
     {{"annotations", {{std::string{remediation_state_annotation}, value}}}}}};
  auto request = kube::make_request(
    "PATCH", kube::resource_path({"", "v1", "nodes", false}, {}, node), patch.dump());
  request.content_type = kube::content_type::merge_patch;
  return request;
}

} // namespace vigil::control
