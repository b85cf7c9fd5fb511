#include "actors/control/node/node_remediation.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/control/rules/circuit_breaker.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil::node_remediation_steps {

namespace {

// The node's pool (remediation.pool_label); "" before its Node is known.
std::string pool_of_node(const node_state& st) {
  return st.node ? control::pool_of(st.node->observation.labels,
                                    st.settings->remediation.pool_label)
                 : std::string{};
}

namespace cmd = control::remediation_command;
using control::remediation_request;
using nlohmann::json;

/// REPLACE_VM handed to the provider: the time it was asked for.
constexpr const char* replace_requested_annotation = "vigil.dev/replace-requested";

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("remediation");
}

// Global dry run, or this stage's, or the drain's: pods a dry-run drain left
// running must not lose their GPU to a reset or reboot.
bool dry_run(const node_settings& s) {
  return s.dry_run || s.remediation.dry_run || s.drain->dry_run;
}

control::node_gpu_facts facts_of(const node_state& st) {
  const auto* agent = st.agent_gpus ? &*st.agent_gpus : nullptr;
  return st.node ? control::gpu_facts_from_labels(st.node->observation.labels, agent)
                 : control::gpu_facts_from_labels({}, agent);
}

// GPU feature discovery's count of the node's GPUs.
std::optional<int> gpu_count_of(const node_state& st) {
  if (!st.node)
    return std::nullopt;
  const auto& labels = st.node->observation.labels;
  auto it = labels.find(std::string(control::gpu_fact_label::count));
  if (it == labels.end())
    return std::nullopt;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The journal row of one remediation step. The key makes a step repeated on
// the same request (a retry, a replay) a duplicate, never a second row.
journal_record step_row(const node_state& st, const std::string& phase,
                        const remediation_request& request, json details) {
  details["phase"] = phase;
  details["group"] = request.plan.group;
  details["kind"] = std::string{control::to_string(request.plan.kind)};
  details["action"] = std::string{to_string(request.plan.action)};
  details["gpuUUID"] = request.plan.gpu_uuid;
  details["eventId"] = request.event_id;
  details["reason"] = request.plan.reason;
  if (request.plan.custom) {
    details["customAction"] = request.plan.custom->name;
    details["customKind"] = request.plan.custom->kind;
  }
  details["dryRun"] = dry_run(*st.settings);
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.node = st.node_name;
  row.kind = control::remediation_row;
  // "created" once per CR (its name is fixed by group and event): a replay
  // counts each attempt once. The other steps may recur (a retried start).
  row.idempotency_key = st.node_name + "/remediation/" + request.plan.group + "/"
                        + request.event_id + "/" + phase;
  if (phase != "created")
    row.idempotency_key +=
      "/" + std::to_string(row.recorded_at.time_since_epoch().count());
  row.body = details.dump();
  return row;
}

void carry_out(node_actor* self, control::remediation_commands commands);

// Feeds an input to the machine and carries out what it says.
template <class Input>
void feed(node_actor* self, Input input) {
  carry_out(self, input(*self->state.remediation, view_of(self->state),
                        self->state.time->wall_now()));
}

void journal(node_actor* self, const cmd::journal_step& step) {
  self
    ->request(self->state.journal, caf::infinite, append_atom::value,
              step_row(self->state, step.phase, step.request, step.details))
    .then([](const append_outcome&) {},
          [=, phase = step.phase](const caf::error& err) {
            logger()->warn("node {}: remediation step {} not journaled: {}",
                           self->state.node_name, phase, caf::to_string(err));
          });
}

void find_cr(node_actor* self, const cmd::find_cr& c) {
  self
    ->request(self->state.gateway, caf::infinite,
              control::get_cr_request(c.request.plan, c.cr))
    .then([=](const kube::kube_result& result) {
      using machine = control::remediation_machine;
      if (result.ok())
        return feed(self, [&](machine& m, const auto&, wall_time now) {
          return m.on_cr_found(c.generation, c.cr, now);
        });
      if (result.error().not_found())
        return feed(self, [&](machine& m, const auto& view, wall_time now) {
          return m.on_cr_absent(c.generation, view, now);
        });
      feed(self, [&](machine& m, const auto&, wall_time now) {
        return m.on_retry(
          c.generation,
          "reading " + c.cr + " failed (" + result.error().to_string() + ")", now);
      });
    });
}

void ask_breaker(node_actor* self, const cmd::ask_breaker& c) {
  using machine = control::remediation_machine;
  self
    ->request(self->state.breaker, caf::infinite, remedy_atom::value,
              self->state.node_name, c.pool)
    .then(
      [=](const std::string& refusal) {
        feed(self, [&](machine& m, const auto& view, wall_time now) {
          return m.on_breaker_answer(c.generation, refusal, view, now);
        });
      },
      [=](const caf::error& err) {
        feed(self, [&](machine& m, const auto&, wall_time now) {
          return m.on_retry(c.generation,
                            "the breaker did not answer (" + caf::to_string(err) + ")",
                            now);
        });
      });
}

// Journal first (ARCHITECTURE.md §2): the CR is asked for only once its
// "created" row is stored, so a replay never misses an attempt.
void create_cr(node_actor* self, const cmd::create_cr& c) {
  using machine = control::remediation_machine;
  auto retry = [=](const std::string& why) {
    feed(self, [&](machine& m, const auto&, wall_time now) {
      return m.on_retry(c.generation, why, now);
    });
  };
  auto post = [=] {
    auto body = control::maintenance_cr_body(c.cr, self->state.node_name, c.request.plan,
                                             c.request.event_id);
    self
      ->request(self->state.gateway, caf::infinite,
                control::create_cr_request(c.request.plan, body))
      .then([=](const kube::kube_result& result) {
        if (result.ok() || result.error().conflict())
          return feed(self, [&](machine& m, const auto&, wall_time now) {
            return m.on_cr_created(c.generation, c.cr, now);
          });
        if (!result.error().retryable())
          return feed(self, [&](machine& m, const auto& view, wall_time now) {
            return m.on_cr_rejected(c.generation, result.error().to_string(), view, now);
          });
        retry("creating " + c.cr + " failed (" + result.error().to_string() + ")");
      });
  };
  self
    ->request(self->state.journal, caf::infinite, append_atom::value,
              step_row(self->state, "created", c.request, {{"cr", c.cr}}))
    .then([=](const append_outcome&) { post(); },
          [=](const caf::error& err) {
            retry(c.cr + " not journaled (" + caf::to_string(err) + ")");
          });
}

void read_cr(node_actor* self, const cmd::read_cr& c) {
  using machine = control::remediation_machine;
  self->request(self->state.gateway, caf::infinite, control::get_cr_request(c.plan, c.cr))
    .then([=](const kube::kube_result& result) {
      if (!result.ok() && result.error().not_found())
        return feed(self, [&](machine& m, const auto& view, wall_time now) {
          return m.on_cr_missing(c.generation, view, now);
        });
      auto progress =
        result.ok()
          ? control::read_cr_progress(result.response().body)
          : expected<control::cr_progress>{failure{c.cr, result.error().to_string()}};
      if (!progress) {
        logger()->warn("node {}: reading {} failed: {}", self->state.node_name, c.cr,
                       progress.error().to_string());
        return feed(self, [&](machine& m, const auto&, wall_time now) {
          return m.on_cr_unreadable(c.generation, now);
        });
      }
      feed(self, [&](machine& m, const auto& view, wall_time now) {
        return m.on_cr_progress(c.generation, *progress, view, now);
      });
    });
}

void write_annotation(node_actor* self, const control::remediation_state& state) {
  self
    ->request(self->state.gateway, caf::infinite,
              control::remediation_annotation_request(self->state.node_name, state))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        logger()->warn("node {}: {} not written: {}", self->state.node_name,
                       control::remediation_state_annotation, result.error().to_string());
    });
}

void request_replacement(node_actor* self, const cmd::request_replacement& c) {
  logger()->warn("node {}: replacement handed to the provider ({} annotated)",
                 self->state.node_name, replace_requested_annotation);
  json patch = {
    {"metadata",
     {{"annotations",
       {{std::string{replace_requested_annotation}, format_rfc3339(c.at)}}}}}};
  auto write = kube::make_request(
    "PATCH", kube::resource_path({"", "v1", "nodes", false}, {}, self->state.node_name),
    patch.dump());
  write.content_type = kube::content_type::merge_patch;
  self->request(self->state.gateway, caf::infinite, std::move(write))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        logger()->warn("node {}: {} not written: {}", self->state.node_name,
                       replace_requested_annotation, result.error().to_string());
    });
}

void hand_to_operator(node_actor* self, const cmd::hand_to_operator& c) {
  ++self->state.settings->counters->remediations_manual;
  self->state.handed_to_operator = c.why;
  journal(self, {"manual", c.request, json::object()});
  logger()->warn("node {}: {}", self->state.node_name, c.why);
  if (!dry_run(*self->state.settings))
    post_node_event(self, "RemediationNeedsOperator", c.why, true);
}

// Each record is cleared by a healthy event of the same agent and check,
// journaled first like any other event, so a replay reaches the same state.
void clear_records(node_actor* self, const cmd::clear_records& c) {
  auto& st = self->state;
  st.handed_to_operator.clear();
  for (const auto& record : c.records) {
    health_event healthy;
    healthy.agent = record.agent;
    healthy.component_class = record.component_class;
    healthy.check_name = record.check_name;
    healthy.is_healthy = true;
    healthy.entities = {record.subject};
    healthy.node_name = st.node_name;
    healthy.generated = st.time->wall_now();
    healthy.message = "cleared by RebootNode " + c.cr
                      + ": the node rebooted (boot ID changed) and is Ready, and this "
                        "was reported before the reboot began";
    healthy.id = c.cr + "/" + record.agent + "/" + record.check_name + "/"
                 + record.subject.type + "/" + record.subject.value;
    self
      ->request(st.journal, caf::infinite, append_atom::value,
                event_row(healthy, st.time->wall_now()))
      .then(
        [=](const append_outcome&) {
          self->send(self, route_atom::value, healthy, std::int64_t{0});
        },
        [=](const caf::error& err) {
          logger()->error("node {}: healthy event after reboot {} not journaled ({}); "
                          "the node stays quarantined",
                          self->state.node_name, c.cr, caf::to_string(err));
        });
  }
}

// The validation Job, POSTed once per ask (its name is fixed, so 409 is the
// same Job); a failure is logged, and the machine's next read finds it
// missing and asks again.
void run_validation(node_actor* self, const cmd::run_validation& c) {
  auto& st = self->state;
  const auto& options = st.settings->remediation.validation_jobs;
  auto job = control::build_validation_job(c, st.node_name, options,
                                           st.settings->remediation.validation.timeout);
  auto request = kube::make_request(
    "POST", kube::resource_path({"batch", "v1", "jobs", true}, options.job_namespace, ""),
    job.dump());
  self->request(st.gateway, caf::infinite, std::move(request))
    .then([=](const kube::kube_result& result) {
      if (!result.ok() && !result.error().conflict())
        logger()->warn("node {}: validation Job {} not created: {}",
                       self->state.node_name, c.job, result.error().to_string());
    });
}

void read_validation(node_actor* self, const cmd::read_validation& c) {
  using machine = control::remediation_machine;
  const auto& ns = self->state.settings->remediation.validation_jobs.job_namespace;
  self
    ->request(self->state.gateway, caf::infinite,
              kube::make_request(
                "GET", kube::resource_path({"batch", "v1", "jobs", true}, ns, c.job), ""))
    .then([=](const kube::kube_result& result) {
      if (!result.ok() && result.error().not_found())
        return feed(self, [&](machine& m, const auto& view, wall_time now) {
          return m.on_validation_missing(c.generation, view, now);
        });
      control::validation_progress progress; // unreadable: still running
      if (result.ok()) {
        auto read = control::read_validation_job(
          json::parse(result.response().body, nullptr, false));
        if (read)
          progress = *read;
        else
          logger()->warn("node {}: unreadable {}: {}", self->state.node_name, c.job,
                         read.error().to_string());
      }
      feed(self, [&](machine& m, const auto& view, wall_time now) {
        return m.on_validation_progress(c.generation, progress, view, now);
      });
    });
}

// Journaled first like any agent's event, then applied through the node's
// own route: the fault keeps the node quarantined and climbs the ladder.
void report_fault(node_actor* self, const health_event& fault) {
  auto& st = self->state;
  self
    ->request(st.journal, caf::infinite, append_atom::value,
              event_row(fault, st.time->wall_now()))
    .then(
      [=](const append_outcome&) {
        self->send(self, route_atom::value, fault, std::int64_t{0});
      },
      [=](const caf::error& err) {
        logger()->error("node {}: fault {} not journaled ({}): {}", self->state.node_name,
                        fault.id, caf::to_string(err), fault.message);
      });
}

void count(node_state& st, control::remediation_metric metric) {
  auto& counters = *st.settings->counters;
  switch (metric) {
    case control::remediation_metric::started:
      ++st.stats.remediations_started;
      ++counters.remediations_started;
      break;
    case control::remediation_metric::succeeded:
      ++st.stats.remediations_succeeded;
      ++counters.remediations_succeeded;
      break;
    case control::remediation_metric::failed:
      ++st.stats.remediations_failed;
      ++counters.remediations_failed;
      break;
    case control::remediation_metric::skipped: ++counters.remediations_skipped; break;
    case control::remediation_metric::manual: ++counters.remediations_manual; break;
    case control::remediation_metric::escalated: ++counters.escalations; break;
    case control::remediation_metric::validated: ++counters.validations_passed; break;
    case control::remediation_metric::validation_failed:
      ++counters.validations_failed;
      break;
  }
}

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

void carry_out(node_actor* self, control::remediation_commands commands) {
  auto& st = self->state;
  for (auto& command : commands)
    std::visit(
      overloaded{
        [&](const cmd::journal_step& c) { journal(self, c); },
        [&](const cmd::find_cr& c) { find_cr(self, c); },
        [&](const cmd::ask_breaker& c) { ask_breaker(self, c); },
        [&](const cmd::create_cr& c) {
          st.handed_to_operator.clear(); // an automatic step again
          create_cr(self, c);
        },
        [&](const cmd::read_cr& c) { read_cr(self, c); },
        [&](const cmd::leave_pool&) {
          self->send(st.breaker, remedied_atom::value, st.node_name);
        },
        [&](const cmd::occupy_slot&) {
          self->send(st.breaker, occupy_atom::value, st.node_name, pool_of_node(st));
        },
        [&](const cmd::wake& c) {
          auto in = std::max(caf::timespan{0}, caf::timespan{c.at - st.time->wall_now()});
          switch (c.timer) {
            case control::remediation_timer::start:
              self->delayed_send(self, in, remediation_start_atom::value);
              break;
            case control::remediation_timer::poll:
              self->delayed_send(self, in, remediation_poll_atom::value);
              break;
            case control::remediation_timer::verify:
              self->delayed_send(self, in, remediation_verify_atom::value);
              break;
          }
        },
        [&](const cmd::post_event& c) {
          post_node_event(self, c.reason, c.message, c.warning);
        },
        [&](const cmd::write_annotation& c) { write_annotation(self, c.state); },
        [&](const cmd::request_replacement& c) { request_replacement(self, c); },
        [&](const cmd::hand_to_operator& c) { hand_to_operator(self, c); },
        [&](const cmd::clear_records& c) { clear_records(self, c); },
        // The node actor's drain convergence reads needs_full_drain().
        [&](const cmd::drain_fully&) { self->send(self, reconcile_atom::value); },
        [&](const cmd::run_validation& c) { run_validation(self, c); },
        [&](const cmd::read_validation& c) { read_validation(self, c); },
        [&](const cmd::report_fault& c) { report_fault(self, c.event); },
        // The quarantine is decided again without the machine's hold.
        [&](const cmd::hold_ended&) { self->send(self, reconcile_atom::value); },
        [&](const cmd::count& c) { count(st, c.metric); },
        [&](const cmd::log& c) {
          if (c.warning)
            logger()->warn("node {}: {}", st.node_name, c.text);
          else
            logger()->info("node {}: {}", st.node_name, c.text);
        },
      },
      command);
}

} // namespace

control::remediation_config config_of(const node_settings& settings) {
  const auto& r = settings.remediation;
  control::remediation_config config;
  config.escalation = control::node_escalation_policy(
    r.escalation, settings.correlation.remediation_repeat_threshold,
    settings.correlation.remediation_window);
  config.options = r.options;
  config.poll = std::chrono::duration_cast<std::chrono::seconds>(r.poll);
  config.cr_timeout = r.cr_timeout;
  config.terminate_timeout = r.terminate_timeout;
  config.retry = std::chrono::duration_cast<std::chrono::seconds>(settings.retry_max);
  config.dry_run = dry_run(settings);
  config.validation = r.validation;
  return config;
}

control::remediation_view view_of(const node_state& st) {
  control::remediation_view view;
  view.records = st.active.records();
  view.drain_busy = st.drain || st.drain_permit_pending;
  view.drained = st.drain_history;
  view.drained_key = st.drained_key;
  view.facts = facts_of(st);
  view.gpu_count = gpu_count_of(st);
  if (st.node) {
    const auto& observed = st.node->observation;
    view.quarantined = observed.unschedulable || dry_run(*st.settings);
    auto opt_out = observed.labels.find(st.settings->quarantine.opt_out_label);
    view.opted_out = opt_out != observed.labels.end() && opt_out->second == "true";
    view.pool = pool_of_node(st);
  }
  return view;
}

void consider(node_actor* self) {
  if (!self->state.settings->remediation.enabled)
    return;
  feed(self,
       [](auto& m, const auto& view, wall_time now) { return m.consider(view, now); });
}

void on_timer(node_actor* self, control::remediation_timer timer) {
  feed(self, [timer](auto& m, const auto& view, wall_time now) {
    return m.on_timer(timer, view, now);
  });
}

void on_healthy_event(node_actor* self, const health_event& event) {
  feed(self, [&](auto& m, const auto&, wall_time now) {
    return m.on_healthy_event(event, now);
  });
}

nlohmann::json summary(const node_state& st) {
  auto out = st.remediation->summary(st.time->wall_now());
  out["started"] = st.stats.remediations_started;
  out["succeeded"] = st.stats.remediations_succeeded;
  out["failed"] = st.stats.remediations_failed;
  return out;
}

} // namespace vigil::node_remediation_steps
