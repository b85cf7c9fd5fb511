#include "actors/control/rules/drain_plan.hpp"

#include <algorithm>
#include <regex>

#include "messages/user_regex.hpp"

namespace vigil::control {

namespace {

bool holds_any(const pod_info& pod, const std::vector<std::string>& uuids) {
  if (!pod.gpu_uuids)
    return false;
  return std::any_of(pod.gpu_uuids->begin(), pod.gpu_uuids->end(),
                     [&](const std::string& u) {
                       return std::find(uuids.begin(), uuids.end(), u) != uuids.end();
                     });
}

// DaemonSet, mirror/static, finished, vigil's own and system-namespace pods
// are never drained.
std::optional<std::string> never_drained(const pod_info& pod, const drain_config& config,
                                         const std::regex& system) {
  if (pod.owner_kind == "DaemonSet")
    return "DaemonSet pod";
  if (is_vigils_own_pod(pod, config))
    return "vigil's own pod";
  if (pod.mirror)
    return "mirror/static pod";
  if (pod.finished)
    return "pod already finished";
  if (std::regex_match(pod.ns, system))
    return "system namespace";
  return std::nullopt;
}

pod_eviction eviction_for(const pod_info& pod, const drain_request& request,
                          const drain_config& config) {
  pod_eviction out{{pod.ns, pod.name}, config.default_mode, {},
                   pod.pdb_protected,  pod.owner_kind,      pod.gpu_uuids,
                   pod.gpu_source};
  for (const auto& entry : config.namespaces)
    if (std::regex_match(pod.ns, std::regex(entry.namespace_pattern))) {
      out.mode = entry.mode;
      out.timeout = entry.timeout;
      break;
    }
  // drainOverrides.force: evict now whatever the namespace's mode says.
  if (request.overrides && request.overrides->force)
    out.mode = drain_mode::immediate;
  return out;
}

// seed 000 §3.1: partial only for COMPONENT_RESET of a known GPU whose holders
// are known; any doubt falls back to a full drain.
drain_scope choose_scope(const std::vector<const pod_info*>& candidates,
                         const drain_request& request, std::string& why) {
  if (request.action != recommended_action::component_reset) {
    why = "action " + std::string(to_string(request.action)) + " needs a full drain";
    return drain_scope::full;
  }
  if (request.gpu_uuids.empty()) {
    why = "COMPONENT_RESET without a GPU_UUID entity: full drain";
    return drain_scope::full;
  }
  for (const auto* pod : candidates)
    if ((pod->requests_gpu || pod->claims_resources) && !pod->gpu_uuids) {
      why = "GPU mapping of pod " + pod->ns + "/" + pod->name + " unknown";
      if (!request.gpu_mapping_note.empty())
        why += " (" + request.gpu_mapping_note + ")";
      why += ": full drain";
      return drain_scope::full;
    }
  why = "COMPONENT_RESET: only pods holding the GPU";
  return drain_scope::partial;
}

} // namespace

bool is_vigils_own_pod(const pod_info& pod, const drain_config& config) {
  const auto& own = config.vigil_namespaces;
  if (std::find(own.begin(), own.end(), pod.ns) != own.end())
    return true;
  auto label = pod.labels.find(std::string{vigil_job_label});
  return pod.owner_kind == "Job" && label != pod.labels.end()
         && label->second == vigil_job_label_value;
}

std::string_view to_string(drain_mode mode) {
  switch (mode) {
    case drain_mode::immediate: return "Immediate";
    case drain_mode::allow_completion: return "AllowCompletion";
    case drain_mode::delete_after_timeout: return "DeleteAfterTimeout";
  }
  return "Immediate";
}

std::string_view to_string(drain_scope scope) {
  switch (scope) {
    case drain_scope::none: return "none";
    case drain_scope::partial: return "partial";
    case drain_scope::full: return "full";
  }
  return "none";
}

std::string_view to_string(pod_drain_state state) {
  switch (state) {
    case pod_drain_state::pending: return "pending";
    case pod_drain_state::in_request: return "in_request";
    case pod_drain_state::retry_wait: return "retry_wait";
    case pod_drain_state::terminating: return "terminating";
    case pod_drain_state::awaiting_completion: return "awaiting_completion";
    case pod_drain_state::done: return "done";
  }
  return "pending";
}

std::string_view to_string(drain_status status) {
  switch (status) {
    case drain_status::in_progress: return "in_progress";
    case drain_status::succeeded: return "succeeded";
    case drain_status::cancelled: return "cancelled";
  }
  return "in_progress";
}

status validate(const drain_config& config) {
  auto check = [](const std::string& pattern, std::string where) -> status {
    if (auto problem = user_regex_problem(pattern))
      return failure{std::move(where), "regex not accepted: " + *problem};
    try {
      std::regex re(pattern);
      return ok();
    } catch (const std::regex_error& e) {
      return failure{std::move(where), "invalid regex '" + pattern + "': " + e.what()};
    }
  };
  if (auto st = check(config.system_namespaces, "drain.system_namespaces"); !st)
    return st;
  for (std::size_t i = 0; i < config.namespaces.size(); ++i) {
    const auto& entry = config.namespaces[i];
    auto where = "drain.namespaces[" + std::to_string(i) + "]";
    if (auto st = check(entry.namespace_pattern, where + ".namespace"); !st)
      return st;
    if (entry.mode == drain_mode::delete_after_timeout && entry.timeout.count() <= 0)
      return failure{where + ".timeout", "DeleteAfterTimeout needs a positive timeout"};
  }
  if (config.eviction_retry.count() <= 0
      || config.eviction_retry_max < config.eviction_retry)
    return failure{"drain.eviction_retry", "must be positive and <= eviction_retry_max"};
  return ok();
}

std::optional<drain_request> desired_drain(const std::vector<active_record>& records) {
  drain_request out;
  out.action = recommended_action::component_reset;
  bool any = false, all_skip = true, any_force = false;
  auto add_gpu = [&](const entity& e) {
    if (e.type == "GPU_UUID" && !e.value.empty()
        && std::find(out.gpu_uuids.begin(), out.gpu_uuids.end(), e.value)
             == out.gpu_uuids.end())
      out.gpu_uuids.push_back(e.value);
  };
  for (const auto& r : records) {
    if (r.action == recommended_action::none)
      continue;
    any = true;
    if (r.action != recommended_action::component_reset)
      out.action = r.action;
    add_gpu(r.subject);
    for (const auto& other : r.reported_with)
      add_gpu(other);
    all_skip = all_skip && r.drain_overrides && r.drain_overrides->skip;
    any_force = any_force || (r.drain_overrides && r.drain_overrides->force);
  }
  if (!any)
    return std::nullopt;
  if (out.action != recommended_action::component_reset)
    out.gpu_uuids.clear();
  std::sort(out.gpu_uuids.begin(), out.gpu_uuids.end());
  if (all_skip || any_force)
    out.overrides = stage_override{any_force, all_skip && !any_force};
  return out;
}

std::string drain_key(const drain_request& request) {
  if (request.action != recommended_action::component_reset || request.gpu_uuids.empty())
    return "full";
  auto uuids = request.gpu_uuids;
  std::sort(uuids.begin(), uuids.end());
  std::string key = "partial:";
  for (std::size_t i = 0; i < uuids.size(); ++i)
    key += (i ? "," : "") + uuids[i];
  return key;
}

drain_plan plan_drain(const std::vector<pod_info>& pods, const drain_request& request,
                      const drain_config& config) {
  drain_plan plan;
  if (request.overrides && request.overrides->skip) {
    plan.why = "drainOverrides.skip";
    return plan;
  }
  // seed 000 §3.1: after a completed full drain, later full and partial drains
  // are skipped; after a partial one, the next drain must still run.
  if (request.history == drain_history::full_done) {
    plan.why = "a full drain already completed";
    return plan;
  }
  const std::regex system(config.system_namespaces);
  std::vector<const pod_info*> candidates;
  for (const auto& pod : pods) {
    if (auto reason = never_drained(pod, config, system))
      plan.skipped.push_back({{pod.ns, pod.name}, *reason});
    else
      candidates.push_back(&pod);
  }
  plan.scope = choose_scope(candidates, request, plan.why);
  for (const auto* pod : candidates) {
    if (plan.scope == drain_scope::partial && !holds_any(*pod, request.gpu_uuids))
      plan.skipped.push_back({{pod->ns, pod->name}, "does not hold the GPU"});
    else
      plan.evict.push_back(eviction_for(*pod, request, config));
  }
  return plan;
}

drain_progress::drain_progress(drain_plan plan, wall_time started, drain_config config)
  : plan_(std::move(plan)), config_(std::move(config)) {
  for (const auto& target : plan_.evict) {
    pod_progress p{target, pod_drain_state::pending, started, config_.eviction_retry};
    if (target.mode != drain_mode::immediate) {
      p.state = pod_drain_state::awaiting_completion;
      p.not_before = started + target.timeout;
    }
    pods_.emplace(target.pod, p);
  }
}

std::optional<drain_step> drain_progress::step_for(pod_progress& p, wall_time now) const {
  switch (p.state) {
    case pod_drain_state::pending:
      return drain_step{drain_step::kind::evict, p.target.pod};
    case pod_drain_state::retry_wait:
      if (now < p.not_before)
        return std::nullopt;
      return drain_step{p.target.mode == drain_mode::immediate
                          ? drain_step::kind::evict
                          : drain_step::kind::delete_pod,
                        p.target.pod};
    case pod_drain_state::awaiting_completion:
      if (p.target.mode != drain_mode::delete_after_timeout || now < p.not_before)
        return std::nullopt;
      return drain_step{drain_step::kind::delete_pod, p.target.pod};
    default: return std::nullopt;
  }
}

std::vector<drain_step> drain_progress::due(wall_time now) {
  std::vector<drain_step> out;
  if (cancelled_)
    return out;
  for (auto& [ref, p] : pods_)
    if (auto step = step_for(p, now)) {
      p.state = pod_drain_state::in_request;
      out.push_back(*step);
    }
  return out;
}

void drain_progress::on_result(const pod_ref& pod, step_result result, wall_time now) {
  auto i = pods_.find(pod);
  if (i == pods_.end() || i->second.state != pod_drain_state::in_request)
    return;
  auto& p = i->second;
  switch (result) {
    case step_result::accepted: p.state = pod_drain_state::terminating; break;
    case step_result::not_found: p.state = pod_drain_state::done; break;
    case step_result::too_many_requests:
    case step_result::failed:
      p.state = pod_drain_state::retry_wait;
      p.not_before = now + p.backoff;
      p.backoff = std::min(p.backoff * 2, config_.eviction_retry_max);
      break;
  }
}

void drain_progress::on_pod_gone(const pod_ref& pod) {
  auto i = pods_.find(pod);
  if (i != pods_.end())
    i->second.state = pod_drain_state::done;
}

void drain_progress::cancel(std::string why) {
  if (status() != drain_status::in_progress)
    return;
  cancelled_ = true;
  cancel_reason_ = std::move(why);
}

drain_status drain_progress::status() const {
  if (cancelled_)
    return drain_status::cancelled;
  auto all_done = std::all_of(pods_.begin(), pods_.end(), [](const auto& entry) {
    return entry.second.state == pod_drain_state::done;
  });
  return all_done ? drain_status::succeeded : drain_status::in_progress;
}

std::optional<pod_drain_state> drain_progress::state_of(const pod_ref& pod) const {
  auto i = pods_.find(pod);
  if (i == pods_.end())
    return std::nullopt;
  return i->second.state;
}

std::optional<wall_time> drain_progress::next_wakeup() const {
  std::optional<wall_time> out;
  if (cancelled_)
    return out;
  for (const auto& [ref, p] : pods_) {
    bool timed = p.state == pod_drain_state::retry_wait
                 || (p.state == pod_drain_state::awaiting_completion
                     && p.target.mode == drain_mode::delete_after_timeout);
    if (timed && (!out || p.not_before < *out))
      out = p.not_before;
  }
  return out;
}

} // namespace vigil::control
