#include "actors/control/leader/lease_election.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace vigil::control {

using nlohmann::json;

namespace {

const kube::api_resource leases{"coordination.k8s.io", "v1", "leases", true};

// metav1.MicroTime: RFC 3339 with exactly six fraction digits.
std::string micro_time(wall_time t) {
  auto whole = format_rfc3339(from_unix(unix_seconds(t), 0)); // "…:SSZ"
  char fraction[16];
  std::snprintf(fraction, sizeof fraction, ".%06d", unix_nanos(t) / 1000);
  return whole.substr(0, whole.size() - 1) + fraction + "Z";
}

std::optional<wall_time> time_at(const json& spec, const char* key) {
  auto i = spec.find(key);
  if (i == spec.end() || !i->is_string())
    return std::nullopt;
  auto t = parse_rfc3339(i->get<std::string>());
  return t ? std::optional<wall_time>(*t) : std::nullopt;
}

json lease_object(const lease_config& config, const lease_record& record,
                  const std::string& resource_version) {
  json metadata = {{"name", config.name}, {"namespace", config.ns}};
  if (!resource_version.empty())
    metadata["resourceVersion"] = resource_version;
  json spec = {{"holderIdentity", record.holder},
               {"leaseDurationSeconds", record.duration.count()},
               {"leaseTransitions", record.transitions}};
  if (record.acquired)
    spec["acquireTime"] = micro_time(*record.acquired);
  if (record.renewed)
    spec["renewTime"] = micro_time(*record.renewed);
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", metadata},
          {"spec", spec}};
}

} // namespace

expected<lease_record> read_lease(const std::string& lease_json) {
  auto doc = json::parse(lease_json, nullptr, false);
  // As a GET or a write returns it, or as an item of a LIST, which the API
  // server sends without kind and apiVersion (kubernetes/kubernetes#3030):
  // an object naming another kind, or naming none and having no metadata,
  // is not a Lease.
  const auto kind = doc.is_object() ? doc.find("kind") : doc.end();
  if (!doc.is_object()
      || (kind != doc.end() ? !kind->is_string() || *kind != "Lease"
                            : !doc.contains("metadata")))
    return failure{"Lease", "not a Lease object"};
  lease_record out;
  if (auto m = doc.find("metadata"); m != doc.end() && m->is_object())
    out.resource_version = m->value("resourceVersion", "");
  auto s = doc.find("spec");
  if (s == doc.end() || !s->is_object())
    return out; // an empty Lease: nobody holds it
  const auto& spec = *s;
  if (auto h = spec.find("holderIdentity"); h != spec.end() && h->is_string())
    out.holder = h->get<std::string>();
  if (auto d = spec.find("leaseDurationSeconds"); d != spec.end()) {
    if (!d->is_number_integer())
      return failure{"Lease.spec.leaseDurationSeconds", "not an integer"};
    out.duration = std::chrono::seconds{d->get<std::int64_t>()};
  }
  if (auto n = spec.find("leaseTransitions"); n != spec.end() && n->is_number_integer())
    out.transitions = n->get<std::int64_t>();
  out.acquired = time_at(spec, "acquireTime");
  out.renewed = time_at(spec, "renewTime");
  return out;
}

lease_step next_lease_step(const std::optional<lease_record>& observed,
                           const lease_config& config, wall_time now) {
  lease_step step;
  lease_record mine;
  mine.holder = config.identity;
  mine.duration = config.duration;
  mine.renewed = now;
  if (!observed) {
    mine.acquired = now;
    step.what = lease_step::kind::create;
    step.body = lease_object(config, mine, "").dump();
    return step;
  }
  const auto& lease = *observed;
  if (lease.holder == config.identity) {
    mine.acquired = lease.acquired.value_or(now);
    mine.transitions = lease.transitions;
  } else {
    // Someone else's: theirs until it has not been renewed for its duration.
    const auto last = lease.renewed.value_or(lease.acquired.value_or(wall_time{}));
    if (!lease.holder.empty() && now < last + lease.duration) {
      step.what = lease_step::kind::wait;
      step.holder = lease.holder;
      return step;
    }
    mine.acquired = now;
    mine.transitions = lease.transitions + 1;
    step.takeover = true;
  }
  step.what = lease_step::kind::update;
  step.body = lease_object(config, mine, lease.resource_version).dump();
  return step;
}

std::optional<lease_step> release_step(const lease_record& observed,
                                       const lease_config& config, wall_time now) {
  if (observed.holder != config.identity)
    return std::nullopt;
  lease_record released;
  released.duration = std::chrono::seconds{1};
  released.acquired = now;
  released.renewed = now;
  released.transitions = observed.transitions;
  lease_step step;
  step.what = lease_step::kind::update;
  step.body = lease_object(config, released, observed.resource_version).dump();
  return step;
}

bool renew_deadline_passed(const std::optional<wall_time>& renewed,
                           const lease_config& config, wall_time now) {
  return !renewed || now - *renewed >= config.renew_deadline;
}

namespace {

kube::kube_request bounded(kube::kube_request request, const lease_config& config) {
  request.timeout = config.renew_deadline;
  return request;
}

} // namespace

kube::kube_request lease_get_request(const lease_config& config) {
  return bounded(
    kube::make_request("GET", kube::resource_path(leases, config.ns, config.name)),
    config);
}

kube::kube_request lease_write_request(const lease_config& config,
                                       const lease_step& step) {
  if (step.what == lease_step::kind::create)
    return bounded(
      kube::make_request("POST", kube::resource_path(leases, config.ns), step.body),
      config);
  return bounded(kube::make_request(
                   "PUT", kube::resource_path(leases, config.ns, config.name), step.body),
                 config);
}

kube::kube_request lease_list_request(const lease_config& config) {
  return bounded(kube::make_request("GET", kube::resource_path(leases, config.ns)),
                 config);
}

} // namespace vigil::control
