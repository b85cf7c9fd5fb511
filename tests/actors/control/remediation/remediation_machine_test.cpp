#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/janitor/gpu_reset_plan.hpp"

#include <algorithm>
#include <optional>

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

namespace cmd = remediation_command;
using namespace std::chrono_literals;

const std::string gpu_a = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
const std::string gpu_b = "GPU-bbbbbbbb-0000-0000-0000-000000000000";
const wall_time t0 = from_unix(1'700'000'000, 0);

active_record record(const std::string& id, recommended_action action,
                     const std::string& gpu = "", wall_time generated = t0) {
  active_record r;
  r.agent = "syslog-health-monitor";
  r.component_class = "GPU";
  r.check_name = "SysLogsXIDError";
  r.subject = gpu.empty() ? entity{} : entity{"GPU_UUID", gpu};
  r.action = action;
  r.rule = "fatal";
  r.event_id = id;
  r.generated = generated;
  return r;
}

active_record reset_record(const std::string& id, const std::string& gpu) {
  return record(id, recommended_action::component_reset, gpu);
}

active_record reboot_record(const std::string& id) {
  return record(id, recommended_action::restart_bm, gpu_b);
}

// The machine without the validation step: the cases that end at the CR.
remediation_config without_validation() {
  remediation_config config;
  config.validation.after_reset = false;
  config.validation.after_reboot = false;
  return config;
}

// Drives one machine as the node actor does, answering the obvious: no CR
// exists from before a restart, the breaker grants a slot, a CR is created.
// Every command is kept, in order, for the checks.
struct machine_run {
  explicit machine_run(remediation_config config = without_validation())
    : machine("node-1", config) {
    view.quarantined = true;
    view.facts.product_name = "NVIDIA H100 80GB HBM3";
    view.pool = "rack-1";
  }

  /// The records, drained as they want (partial for resets, else full).
  void node_has(std::vector<active_record> records) {
    view.records = std::move(records);
    if (auto wanted = desired_drain(view.records)) {
      view.drained_key = drain_key(*wanted);
      if (view.drained != drain_history::full_done)
        view.drained = view.drained_key == "full" ? drain_history::full_done
                                                  : drain_history::partial_done;
    }
  }

  void take(remediation_commands commands) {
    for (auto& c : commands) {
      seen.push_back(c);
      if (auto* find = std::get_if<cmd::find_cr>(&c)) {
        if (hold_find)
          held_find = *find;
        else if (existing_cr)
          take(machine.on_cr_found(find->generation, find->cr, now));
        else
          take(machine.on_cr_absent(find->generation, view, now));
      } else if (auto* ask = std::get_if<cmd::ask_breaker>(&c)) {
        if (hold_breaker)
          held_generation = ask->generation;
        else
          take(machine.on_breaker_answer(ask->generation, "", view, now));
      } else if (auto* create = std::get_if<cmd::create_cr>(&c)) {
        created.push_back(create->request.plan.kind);
        take(machine.on_cr_created(create->generation, create->cr, now));
      } else if (auto* w = std::get_if<cmd::wake>(&c)) {
        wakes.push_back(*w);
      }
    }
  }

  void consider() { take(machine.consider(view, now)); }

  /// Time passes; due timers fire in order.
  void advance(std::chrono::seconds by) {
    const auto until = now + by;
    for (;;) {
      auto due =
        std::min_element(wakes.begin(), wakes.end(),
                         [](const auto& a, const auto& b) { return a.at < b.at; });
      if (due == wakes.end() || due->at > until)
        break;
      auto fired = *due;
      wakes.erase(due);
      now = std::max(now, fired.at);
      take(machine.on_timer(fired.timer, view, now));
    }
    now = until;
  }

  /// The CR in flight reaches `phase` and the next poll reads it.
  void cr_is(const std::string& phase, std::optional<wall_time> started = std::nullopt) {
    cr_progress p;
    p.phase = phase;
    p.succeeded = phase == "Succeeded";
    p.terminal = p.succeeded || phase == "Failed";
    p.started_at = started;
    take(machine.on_cr_progress(machine.generation(), p, view, now));
  }

  template <class Command>
  std::vector<Command> all() const {
    std::vector<Command> out;
    for (const auto& c : seen)
      if (auto* x = std::get_if<Command>(&c))
        out.push_back(*x);
    return out;
  }

  std::vector<std::string> phases() const {
    std::vector<std::string> out;
    for (const auto& j : all<cmd::journal_step>())
      out.push_back(j.phase + " " + j.request.plan.group);
    return out;
  }

  bool saw_phase(const std::string& phase) const {
    auto p = phases();
    return std::find(p.begin(), p.end(), phase) != p.end();
  }

  remediation_machine machine;
  remediation_view view;
  wall_time now = t0;
  remediation_commands seen;
  std::vector<remediation_kind> created;
  std::vector<cmd::wake> wakes;
  bool existing_cr = false;
  bool hold_find = false; ///< the API server has not answered the lookup yet
  std::optional<cmd::find_cr> held_find;
  bool hold_breaker = false;
  std::uint64_t held_generation = 0;
};

TEST(remediation_machine, a_reset_starts_once_the_node_is_drained) {
  machine_run run;
  run.view.records = {reset_record("e1", gpu_a)};
  run.view.drain_busy = true; // the partial drain runs
  run.consider();
  EXPECT_TRUE(run.created.empty());
  run.view.drain_busy = false;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  ASSERT_EQ(run.created, std::vector<remediation_kind>{remediation_kind::gpu_reset});
  EXPECT_EQ(run.machine.step(), remediation_step::following);
  EXPECT_TRUE(run.saw_phase("requested " + reset_group(gpu_a)));
  ASSERT_EQ(run.all<cmd::ask_breaker>().size(), 1u);
  EXPECT_EQ(run.all<cmd::ask_breaker>()[0].pool, "rack-1");
  ASSERT_FALSE(run.all<cmd::write_annotation>().empty());
  EXPECT_NE(find_group(run.all<cmd::write_annotation>().back().state, reset_group(gpu_a)),
            nullptr);
  // Considered again: nothing is planned twice.
  run.consider();
  EXPECT_EQ(run.created.size(), 1u);
}

TEST(remediation_machine, nothing_starts_before_quarantine_and_drain) {
  for (int variant = 0; variant < 3; ++variant) {
    machine_run run;
    run.node_has({reset_record("e1", gpu_a)});
    if (variant == 0)
      run.view.quarantined = false;
    if (variant == 1)
      run.view.opted_out = true;
    if (variant == 2)
      run.view.drained_key = "partial:" + gpu_b; // another GPU's drain
    run.consider();
    EXPECT_TRUE(run.seen.empty()) << "variant " << variant;
  }
}

// seed 000 §4.3, all four cases through the machine.
TEST(remediation_machine, the_four_ordering_cases) {
  machine_run run;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  // case 2: the same GPU again is skipped, another GPU waits.
  run.node_has(
    {reset_record("e1", gpu_a), reset_record("e2", gpu_a), reset_record("e3", gpu_b)});
  run.consider();
  EXPECT_EQ(run.created.size(), 1u);
  ASSERT_EQ(run.machine.queue().waiting().size(), 1u);
  EXPECT_EQ(run.machine.queue().waiting()[0].plan.group, reset_group(gpu_b));
  // case 3: a reboot waits for the reset in flight, and covers the waiting reset.
  auto records = run.view.records;
  records.push_back(reboot_record("e4"));
  run.node_has(records);
  run.consider();
  ASSERT_EQ(run.machine.queue().waiting().size(), 1u);
  EXPECT_EQ(run.machine.queue().waiting()[0].plan.group, "restart");
  EXPECT_TRUE(run.saw_phase("covered " + reset_group(gpu_b)));
  // The reset finishes; the reboot starts (the node was drained in full for it).
  run.cr_is("Succeeded");
  EXPECT_EQ(run.created.back(), remediation_kind::reboot_node);
  // case 1 and case 4 while the reboot is in flight.
  records.push_back(reboot_record("e5"));
  records.push_back(reset_record("e6", gpu_a));
  run.node_has(records);
  run.consider();
  EXPECT_EQ(run.created.size(), 2u);
  const auto annotation = run.all<cmd::write_annotation>().back().state;
  const auto* covered = find_group(annotation, reset_group(gpu_a));
  ASSERT_NE(covered, nullptr);
  EXPECT_EQ(covered->kind,
            remediation_kind::reboot_node); // case 4: covered by the reboot
}

// Safety: a reboot after a partial drain first widens the drain to full
// (seed 000 §3.1), whatever brought it there.
TEST(remediation_machine, a_failed_reset_drains_the_node_fully_before_its_reboot) {
  machine_run run;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  run.cr_is("Failed");
  EXPECT_EQ(run.created.size(), 1u); // no RebootNode yet
  EXPECT_EQ(run.all<cmd::drain_fully>().size(), 1u);
  EXPECT_TRUE(run.machine.needs_full_drain());
  ASSERT_TRUE(drain_wanted(run.view.records, run.machine.needs_full_drain()).has_value());
  EXPECT_EQ(drain_key(*drain_wanted(run.view.records, true)), "full");
  // The full drain runs, then completes.
  run.view.drain_busy = true;
  run.consider();
  EXPECT_EQ(run.created.size(), 1u);
  run.view.drain_busy = false;
  run.view.drained = drain_history::full_done;
  run.view.drained_key = "full";
  run.consider();
  ASSERT_EQ(run.created.size(), 2u);
  EXPECT_EQ(run.created[1], remediation_kind::reboot_node);
  EXPECT_FALSE(run.machine.needs_full_drain());
  // The reboot keeps the failed reset's evidence first (the janitor's bug report).
  auto creates = run.all<cmd::create_cr>();
  EXPECT_FALSE(creates[0].request.plan.collect_bug_report);
  EXPECT_TRUE(creates[1].request.plan.collect_bug_report);
}

// The GPUReset failed because the GPU operator's operands did not come back:
// a person looks, with the node's healthy GPUs still running their pods.
TEST(remediation_machine, a_reset_whose_operands_did_not_return_goes_to_a_person) {
  machine_run run;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  cr_progress failed;
  failed.phase = "Failed";
  failed.terminal = true;
  failed.failure_reason = std::string{janitor::failure_reason::redeploy_failed};
  failed.message = "not running again after the redeploy timeout: nvidia-dcgm";
  run.take(
    run.machine.on_cr_progress(run.machine.generation(), failed, run.view, run.now));
  EXPECT_TRUE(run.saw_phase("failed " + reset_group(gpu_a)));
  EXPECT_TRUE(run.all<cmd::drain_fully>().empty());
  EXPECT_FALSE(run.machine.needs_full_drain());
  EXPECT_EQ(run.created, std::vector<remediation_kind>{remediation_kind::gpu_reset});
  ASSERT_EQ(run.all<cmd::hand_to_operator>().size(), 1u);
  run.advance(24h);
  run.consider();
  EXPECT_EQ(run.created.size(), 1u); // nothing else is tried
}

TEST(remediation_machine, a_reset_that_falls_back_to_a_reboot_drains_fully_first) {
  machine_run run;
  run.view.facts.product_name = "Tesla V100-SXM2-32GB"; // cannot be reset alone
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  EXPECT_TRUE(run.created.empty());
  EXPECT_EQ(run.all<cmd::drain_fully>().size(), 1u);
  run.view.drained = drain_history::full_done;
  run.view.drained_key = "full";
  run.consider();
  EXPECT_EQ(run.created, std::vector<remediation_kind>{remediation_kind::reboot_node});
  // No reset ran, so there is nothing to keep.
  EXPECT_FALSE(run.all<cmd::create_cr>()[0].request.plan.collect_bug_report);
}

TEST(remediation_machine, a_deleted_or_timed_out_cr_is_a_failure_that_escalates) {
  {
    machine_run run;
    run.node_has({reset_record("e1", gpu_a)});
    run.consider();
    run.take(run.machine.on_cr_missing(run.machine.generation(), run.view, run.now));
    EXPECT_TRUE(run.saw_phase("failed " + reset_group(gpu_a)));
    EXPECT_EQ(run.all<cmd::drain_fully>().size(), 1u);
  }
  {
    remediation_config config;
    config.cr_timeout = 1h;
    machine_run run(config);
    run.node_has({reset_record("e1", gpu_a)});
    run.consider();
    run.advance(30min);
    run.cr_is("Running");
    EXPECT_FALSE(run.saw_phase("failed " + reset_group(gpu_a)));
    run.advance(31min);
    run.cr_is("Running");
    EXPECT_TRUE(run.saw_phase("failed " + reset_group(gpu_a)));
  }
}

TEST(remediation_machine, polls_read_the_cr_in_flight) {
  machine_run run;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  ASSERT_EQ(run.wakes.size(), 1u);
  EXPECT_EQ(run.wakes[0].timer, remediation_timer::poll);
  run.advance(10s);
  ASSERT_EQ(run.all<cmd::read_cr>().size(), 1u);
  EXPECT_EQ(run.all<cmd::read_cr>()[0].cr, run.machine.cr_name());
  run.take(run.machine.on_cr_unreadable(run.machine.generation(), run.now));
  run.advance(10s);
  EXPECT_EQ(run.all<cmd::read_cr>().size(), 2u);
}

TEST(remediation_machine, the_healthy_event_verifies_a_reset_early_or_late) {
  // Late: after the CR's success, within the verification timeout.
  machine_run late;
  late.node_has({reset_record("e1", gpu_a)});
  late.consider();
  late.cr_is("Succeeded");
  health_event healthy;
  healthy.id = "healthy-1";
  healthy.is_healthy = true;
  healthy.entities = {{"GPU_UUID", gpu_a}};
  late.take(late.machine.on_healthy_event(healthy, late.now));
  EXPECT_TRUE(late.saw_phase("verified " + reset_group(gpu_a)));
  late.advance(2h);
  EXPECT_EQ(late.created.size(), 1u);
  // Early: the Job logs its line before the janitor restored the labels.
  machine_run early;
  early.node_has(
    {reset_record("e1", gpu_a), record("s", recommended_action::contact_support)});
  early.consider();
  early.take(early.machine.on_healthy_event(healthy, early.now));
  early.cr_is("Succeeded");
  EXPECT_TRUE(early.saw_phase("verified " + reset_group(gpu_a)));
  early.advance(2h);
  EXPECT_EQ(early.created.size(), 1u);
}

TEST(remediation_machine, a_reset_not_verified_in_time_escalates_to_a_reboot) {
  machine_run run;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  run.cr_is("Succeeded");
  run.advance(11min); // past remediation.escalation.verify_reset_timeout
  EXPECT_EQ(run.all<cmd::drain_fully>().size(), 1u); // the reboot waits for a full drain
  run.view.drained = drain_history::full_done;
  run.view.drained_key = "full";
  run.consider();
  EXPECT_EQ(run.created.back(), remediation_kind::reboot_node);
}

// Safety: a reboot clears only what predates it; a fault reported after the
// reboot began belongs to the new boot and keeps the node quarantined.
TEST(remediation_machine, a_reboots_success_clears_only_what_predates_the_boot) {
  machine_run run;
  run.node_has({reboot_record("e1")});
  run.consider();
  ASSERT_EQ(run.created, std::vector<remediation_kind>{remediation_kind::reboot_node});
  const auto boot_began = run.now + 1min;
  run.advance(20min);
  auto after = record("e2", recommended_action::restart_bm, gpu_a, run.now);
  after.check_name = "SysLogsXIDError";
  run.view.records.push_back(after);
  run.cr_is("Succeeded", boot_began);
  auto cleared = run.all<cmd::clear_records>();
  ASSERT_EQ(cleared.size(), 1u);
  ASSERT_EQ(cleared[0].records.size(), 1u);
  EXPECT_EQ(cleared[0].records[0].event_id, "e1");
}

// A fault of the new boot, reported while the reboot ran, was taken as covered
// by it (seed 000 §4.3: a reboot resets every GPU); the reboot did not fix
// it, so it gets its own remediation once the reboot is over, instead of
// leaving the node cordoned with nothing in flight.
TEST(remediation_machine, a_fault_reported_during_a_reboot_is_remediated_after_it) {
  machine_run run{remediation_config{}}; // with validation
  run.node_has({reboot_record("e1")});
  run.consider();
  ASSERT_EQ(run.created, std::vector<remediation_kind>{remediation_kind::reboot_node});
  const auto boot_began = run.now + 1min;
  run.advance(5min);
  // XID 48 on GPU a, reported by the new boot.
  auto after = record("e2", recommended_action::component_reset, gpu_a, run.now);
  run.view.records.push_back(after);
  run.consider();
  EXPECT_TRUE(run.saw_phase("requested " + reset_group(gpu_a)));
  EXPECT_EQ(run.created.size(), 1u); // covered while the reboot runs
  run.cr_is("Succeeded", boot_began);
  ASSERT_EQ(run.all<cmd::clear_records>().size(), 1u);
  run.view.records = {after}; // the node applied the clear
  EXPECT_EQ(run.machine.step(), remediation_step::validating);
  // While the reboot is validated, XID 48 on GPU b: also the new boot's.
  run.advance(1min);
  auto during_validation =
    record("e3", recommended_action::component_reset, gpu_b, run.now);
  run.view.records.push_back(during_validation);
  run.consider();
  EXPECT_EQ(run.created.size(), 1u); // still covered: the reboot is not over
  run.take(run.machine.on_validation_progress(run.machine.generation(), {true, true, ""},
                                              run.view, run.now));
  // The reboot is over: the reset of GPU a follows on its own, GPU b's waits
  // behind it (one remediation at a time per node).
  ASSERT_EQ(run.created.size(), 2u);
  EXPECT_EQ(run.created[1], remediation_kind::gpu_reset);
  EXPECT_EQ(run.all<cmd::create_cr>().back().request.event_id, "e2");
  ASSERT_EQ(run.machine.queue().waiting().size(), 1u);
  EXPECT_EQ(run.machine.queue().waiting().front().event_id, "e3");
}

// The same GPU faults again while its reset is validated (the chaos run's
// seed 3: XID 95, reset, healthy, XID 95 again before the validation Job
// ended). The queue takes the second fault as the reset in flight; the reset
// did not fix it, so once the reset is over it is remediated on its own (the
// ladder decides how) instead of leaving the node cordoned with nothing in
// flight. A repeat of the first fault from before the reset is not.
TEST(remediation_machine,
     a_gpu_that_faults_again_during_its_reset_is_remediated_after_it) {
  machine_run run{remediation_config{}}; // with validation
  auto first = reset_record("e1", gpu_a);
  auto repeat = record("e1-repeat", recommended_action::component_reset, gpu_a, run.now);
  run.node_has({first, repeat});
  run.consider();
  ASSERT_EQ(run.created, std::vector<remediation_kind>{remediation_kind::gpu_reset});
  const auto reset_began = run.now + 10s;
  run.advance(30s);
  run.view.records.clear(); // the reset Job's healthy event
  run.consider();
  run.cr_is("Succeeded", reset_began);
  ASSERT_EQ(run.machine.step(), remediation_step::validating);
  run.advance(5s);
  auto again = record("e2", recommended_action::component_reset, gpu_a, run.now);
  run.view.records = {again};
  run.consider();
  EXPECT_EQ(run.created.size(), 1u); // covered while the reset is validated
  run.take(run.machine.on_validation_progress(run.machine.generation(), {true, true, ""},
                                              run.view, run.now));
  ASSERT_TRUE(run.machine.queue().in_flight());
  EXPECT_EQ(run.machine.queue().in_flight()->event_id, "e2");
  run.advance(2h); // past any cooldown or backoff the ladder sets
  run.view.drained = drain_history::full_done; // should the ladder climb to a reboot
  run.view.drained_key = "full";
  run.consider();
  ASSERT_EQ(run.created.size(), 2u);
  EXPECT_EQ(run.all<cmd::create_cr>().back().request.event_id, "e2");
}

// A reboot whose validation fails climbs the ladder first: what the new boot
// reported is planned only once that fault is applied, not before it.
TEST(remediation_machine, after_a_failed_validation_the_climb_comes_first) {
  machine_run run{remediation_config{}};
  run.node_has({reboot_record("e1")});
  run.consider();
  const auto boot_began = run.now + 1min;
  run.advance(5min);
  auto after = record("e2", recommended_action::component_reset, gpu_a, run.now);
  run.view.records.push_back(after);
  run.consider();
  run.cr_is("Succeeded", boot_began);
  run.view.records = {after};
  run.take(run.machine.on_validation_progress(
    run.machine.generation(), {true, false, "dcgmi diag failed"}, run.view, run.now));
  EXPECT_EQ(run.created.size(), 1u); // nothing before the reported fault is applied
  auto faults = run.all<cmd::report_fault>();
  ASSERT_EQ(faults.size(), 1u);
  auto fault = record(faults[0].event.id, faults[0].event.action, "", run.now);
  run.view.records.push_back(fault);
  run.consider();
  ASSERT_GE(run.created.size(), 2u);
  EXPECT_EQ(run.all<cmd::create_cr>()[1].request.event_id, faults[0].event.id);
}

TEST(remediation_machine, a_climb_deferred_by_a_cooldown_is_counted_once) {
  auto config = without_validation();
  config.escalation.max_resets_per_gpu = 1;
  machine_run run(config);
  run.node_has({reboot_record("r1")});
  run.consider();
  run.cr_is("Succeeded");
  run.take(run.machine.consider({}, run.now)); // released
  run.view = {};
  run.view.quarantined = true;
  run.view.facts.product_name = "NVIDIA H100 80GB HBM3";
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  run.cr_is("Succeeded");
  run.take(run.machine.consider({}, run.now));
  run.view.records.clear();
  run.view.drained = drain_history::none;
  // GPU-a fails again: its one reset is spent, so a reboot, which waits out
  // the cooldown after the first reboot.
  run.node_has({reset_record("e2", gpu_a)});
  run.view.drained = drain_history::full_done; // drained in full meanwhile
  run.consider();
  const auto escalations = [&] {
    auto counts = run.all<cmd::count>();
    return std::count_if(counts.begin(), counts.end(), [](const cmd::count& c) {
      return c.metric == remediation_metric::escalated;
    });
  };
  EXPECT_EQ(escalations(), 1);
  EXPECT_EQ(run.machine.step(), remediation_step::deferred);
  EXPECT_EQ(run.created.size(), 2u);
  run.advance(5min);
  ASSERT_EQ(run.created.size(), 3u);
  EXPECT_EQ(run.created.back(), remediation_kind::reboot_node);
  EXPECT_EQ(escalations(), 1);
}

TEST(remediation_machine, a_held_remediation_is_journaled_and_asked_again) {
  machine_run run;
  run.hold_breaker = true;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  run.take(run.machine.on_breaker_answer(
    run.held_generation, "pool rack-1 is at its budget", run.view, run.now));
  EXPECT_TRUE(run.saw_phase("held " + reset_group(gpu_a)));
  EXPECT_EQ(run.machine.step(), remediation_step::deferred);
  run.hold_breaker = false;
  run.advance(60s);
  EXPECT_EQ(run.created.size(), 1u);
}

TEST(remediation_machine, a_release_ends_everything_and_ignores_late_answers) {
  machine_run run;
  run.hold_breaker = true;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  const auto asked_in = run.held_generation;
  run.view.records.clear();
  run.consider();
  EXPECT_TRUE(run.saw_phase("released " + reset_group(gpu_a)));
  EXPECT_EQ(run.machine.step(), remediation_step::idle);
  EXPECT_TRUE(run.machine.queue().idle());
  auto before = run.all<cmd::leave_pool>().size();
  // The breaker's slot arrives after the release: it is given back at once.
  run.take(run.machine.on_breaker_answer(asked_in, "", run.view, run.now));
  EXPECT_EQ(run.all<cmd::leave_pool>().size(), before + 1);
  EXPECT_TRUE(run.created.empty());
}

TEST(remediation_machine, a_cr_created_before_a_restart_is_followed_not_created_again) {
  machine_run run;
  run.existing_cr = true;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  EXPECT_TRUE(run.created.empty());
  EXPECT_EQ(run.machine.step(), remediation_step::following);
  EXPECT_TRUE(run.all<cmd::count>().empty()); // its attempt was counted before
  // It counts against its pool while it runs (the budget after a restart or
  // a shard's handover), and gives the slot back when it is over.
  EXPECT_EQ(run.all<cmd::occupy_slot>().size(), 1u);
  EXPECT_TRUE(run.all<cmd::ask_breaker>().empty());
  EXPECT_TRUE(run.all<cmd::leave_pool>().empty());
  run.cr_is("Succeeded");
  EXPECT_EQ(run.all<cmd::leave_pool>().size(), 1u);
}

// After a restart or a shard's handover the machine looks for the CR it may
// have created before. Until it knows, the node stays quarantined: a reboot
// may be under way, and a healthy event meanwhile must not return the node.
TEST(remediation_machine,
     the_node_stays_quarantined_while_a_cr_from_before_is_looked_for) {
  for (const bool exists : {true, false}) {
    machine_run run;
    run.hold_find = true;
    run.node_has({reboot_record("e1")});
    run.consider();
    ASSERT_TRUE(run.held_find.has_value());
    EXPECT_TRUE(run.machine.holds_quarantine());
    run.node_has({}); // the healthy event
    run.consider();
    EXPECT_TRUE(run.machine.holds_quarantine());
    EXPECT_TRUE(run.all<cmd::hold_ended>().empty());
    if (exists) {
      // The reboot is under way: the node returns once it is over.
      run.take(
        run.machine.on_cr_found(run.held_find->generation, run.held_find->cr, run.now));
      EXPECT_EQ(run.machine.step(), remediation_step::following);
      EXPECT_TRUE(run.machine.holds_quarantine());
    } else {
      // Nothing runs and nothing is wanted any more: released, nothing created.
      run.take(run.machine.on_cr_absent(run.held_find->generation, run.view, run.now));
      EXPECT_FALSE(run.machine.holds_quarantine());
      EXPECT_EQ(run.all<cmd::hold_ended>().size(), 1u);
      EXPECT_TRUE(run.created.empty());
      EXPECT_TRUE(run.all<cmd::ask_breaker>().empty());
    }
  }
}

// A successor (restart, shard handover) replays a history in which the
// fault cleared while its reboot's CR ran: no record is left to plan, but
// the journal says the CR has no outcome. The machine looks for it and
// follows it; the node returns only when it is over.
TEST(remediation_machine, a_cr_without_an_outcome_is_followed_though_its_fault_cleared) {
  machine_run run;
  run.existing_cr = true;
  run.machine.resume(recommended_action::restart_bm, gpu_b, "e1", "");
  run.node_has({});
  run.consider();
  ASSERT_EQ(run.all<cmd::find_cr>().size(), 1u);
  EXPECT_EQ(run.all<cmd::find_cr>()[0].cr,
            maintenance_cr_name("node-1", run.all<cmd::find_cr>()[0].request.plan, "e1"));
  EXPECT_EQ(run.machine.step(), remediation_step::following);
  EXPECT_TRUE(run.machine.holds_quarantine());
  EXPECT_TRUE(run.created.empty());
  run.cr_is("Succeeded");
  EXPECT_FALSE(run.machine.holds_quarantine());
  EXPECT_EQ(run.all<cmd::hold_ended>().size(), 1u);
  // Gone meanwhile: nothing runs, the node returns, nothing is created.
  machine_run gone;
  gone.machine.resume(recommended_action::restart_bm, gpu_b, "e1", "");
  gone.node_has({});
  gone.consider();
  EXPECT_FALSE(gone.machine.holds_quarantine());
  EXPECT_TRUE(gone.created.empty());
}

// A successor replays a history in which the reset succeeded and its
// validation Job began, with no verdict (and the fault cleared meanwhile):
// it follows the same Job, holding the quarantine and the slot, and returns
// the node only once the Job passed (seed 003 "validate before return").
TEST(remediation_machine, a_validation_from_before_a_restart_is_followed) {
  machine_run run{remediation_config{}};
  run.machine.resume(recommended_action::component_reset, gpu_a, "e1", "", "reset-1",
                     true);
  run.node_has({});
  run.consider();
  EXPECT_EQ(run.machine.step(), remediation_step::validating);
  EXPECT_TRUE(run.machine.holds_quarantine());
  EXPECT_TRUE(run.all<cmd::find_cr>().empty());
  EXPECT_TRUE(run.created.empty());
  EXPECT_EQ(run.all<cmd::occupy_slot>().size(), 1u);
  auto runs = run.all<cmd::run_validation>();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].job, validation_job_name("reset-1"));
  EXPECT_EQ(runs[0].gpus, std::vector<std::string>{gpu_a});
  run.take(run.machine.on_validation_progress(run.machine.generation(), {true, true, ""},
                                              run.view, run.now));
  EXPECT_TRUE(run.saw_phase("validated " + reset_group(gpu_a)));
  EXPECT_FALSE(run.machine.holds_quarantine());
  EXPECT_EQ(run.all<cmd::hold_ended>().size(), 1u);
  EXPECT_EQ(run.all<cmd::leave_pool>().size(), 1u);
}

TEST(remediation_machine, a_dry_run_journals_and_creates_nothing) {
  auto config = without_validation();
  config.dry_run = true;
  machine_run run(config);
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  EXPECT_TRUE(run.created.empty());
  EXPECT_TRUE(run.saw_phase("created " + reset_group(gpu_a)));
  EXPECT_TRUE(run.all<cmd::post_event>().empty());
  EXPECT_TRUE(run.all<cmd::write_annotation>().empty());
}

TEST(remediation_machine, contact_support_and_the_ladders_end_go_to_a_person) {
  machine_run run;
  run.node_has({record("s", recommended_action::contact_support)});
  run.consider();
  ASSERT_EQ(run.all<cmd::hand_to_operator>().size(), 1u);
  EXPECT_TRUE(run.created.empty());

  auto config = without_validation();
  config.options.replace = replace_target::provider_hook;
  machine_run replace(config);
  replace.node_has({record("r", recommended_action::replace_vm)});
  replace.consider();
  ASSERT_EQ(replace.all<cmd::request_replacement>().size(), 1u);
  EXPECT_TRUE(replace.all<cmd::hand_to_operator>().empty());
  replace.advance(config.escalation.verify_replace_timeout);
  EXPECT_EQ(replace.all<cmd::hand_to_operator>().size(), 1u);
}

TEST(remediation_machine, a_failing_gpu_climbs_the_whole_ladder) {
  machine_run run;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  run.cr_is("Failed"); // reset → reboot, after a full drain
  run.view.drained = drain_history::full_done;
  run.view.drained_key = "full";
  run.consider();
  run.cr_is("Failed"); // reboot → replace
  run.advance(10min);  // the cooldown
  run.cr_is("Failed"); // replace → support
  EXPECT_EQ(run.created, (std::vector<remediation_kind>{
                           remediation_kind::gpu_reset, remediation_kind::reboot_node,
                           remediation_kind::terminate_node}));
  EXPECT_EQ(run.all<cmd::hand_to_operator>().size(), 1u);
}

// seed 003, proof of recovery before return: the node is held until the
// validation Job passes; it names the reset GPU and the GPU count before.
TEST(remediation_machine, a_fix_is_validated_before_the_node_is_released) {
  machine_run run{remediation_config{}};
  run.view.gpu_count = 8;
  run.node_has({reset_record("e1", gpu_a)});
  run.consider();
  EXPECT_TRUE(run.machine.holds_quarantine()); // the CR runs
  run.view.records.clear();                    // the Job's "GPU reset occurred": healthy
  run.consider();
  EXPECT_TRUE(run.all<cmd::journal_step>().back().phase != "released");
  run.cr_is("Succeeded");
  EXPECT_EQ(run.machine.step(), remediation_step::validating);
  EXPECT_TRUE(run.machine.holds_quarantine());
  auto runs = run.all<cmd::run_validation>();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].gpus, std::vector<std::string>{gpu_a});
  EXPECT_EQ(runs[0].expected_gpus, 8);
  EXPECT_EQ(runs[0].job, validation_job_name(run.machine.cr_name()));
  run.advance(10s);
  ASSERT_EQ(run.all<cmd::read_validation>().size(), 1u);
  run.take(run.machine.on_validation_progress(run.machine.generation(), {true, true, ""},
                                              run.view, run.now));
  EXPECT_TRUE(run.saw_phase("validated " + reset_group(gpu_a)));
  EXPECT_FALSE(run.machine.holds_quarantine());
  EXPECT_EQ(run.all<cmd::hold_ended>().size(), 1u);
  run.consider(); // the node actor re-decides: no records, nothing held
  EXPECT_TRUE(run.saw_phase("released " + reset_group(gpu_a))
              || run.machine.queue().idle());
}

TEST(remediation_machine, a_failed_or_late_validation_is_a_fault_on_the_next_rung) {
  for (bool late : {false, true}) {
    machine_run run{remediation_config{}};
    run.node_has({reset_record("e1", gpu_a)});
    run.consider();
    run.view.records.clear();
    run.cr_is("Succeeded");
    if (late) {
      run.advance(31min);
      run.take(run.machine.on_validation_progress(run.machine.generation(), {}, run.view,
                                                  run.now));
    } else {
      run.take(run.machine.on_validation_progress(run.machine.generation(),
                                                  {true, false, "BackoffLimitExceeded"},
                                                  run.view, run.now));
    }
    EXPECT_TRUE(run.saw_phase("validation_failed " + reset_group(gpu_a))) << late;
    auto faults = run.all<cmd::report_fault>();
    ASSERT_EQ(faults.size(), 1u) << late;
    EXPECT_EQ(faults[0].event.action, recommended_action::restart_bm);
    EXPECT_TRUE(faults[0].event.is_fatal);
    EXPECT_EQ(faults[0].event.entities.at(0).value, gpu_a);
    // Held until the node has applied the fault: never released in between.
    EXPECT_TRUE(run.machine.holds_quarantine());
    EXPECT_TRUE(run.all<cmd::hold_ended>().empty());
    auto fault = record(faults[0].event.id, recommended_action::restart_bm, gpu_a);
    run.view.records = {fault};
    run.consider();
    EXPECT_FALSE(run.machine.holds_quarantine());
  }
}

TEST(remediation_machine, a_missing_validation_job_is_asked_for_again) {
  machine_run run{remediation_config{}};
  run.node_has({reboot_record("r1")});
  run.consider();
  run.cr_is("Succeeded");
  ASSERT_EQ(run.all<cmd::run_validation>().size(), 1u);
  EXPECT_TRUE(run.all<cmd::run_validation>()[0].gpus.empty()); // every GPU after a reboot
  run.take(
    run.machine.on_validation_missing(run.machine.generation(), run.view, run.now));
  EXPECT_EQ(run.all<cmd::run_validation>().size(), 2u);
}

} // namespace
} // namespace vigil::control
