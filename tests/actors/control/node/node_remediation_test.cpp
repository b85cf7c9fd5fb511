// The node actor's remediation (seed 000 §4): maintenance CRs once the node
// is drained, the four ordering cases, verification, validation (seed 003),
// escalation and its caps, dry-run, operator hand-off. The test plays the
// janitor: it moves the CRs' phases.
#define CAF_SUITE control_remediation
#include <caf/test/dsl.hpp>

#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_remediation_tests, control_fixture)

CAF_TEST(a_reset_xid_creates_one_gpureset_once_the_node_is_drained) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  auto resets = crs("gpuresets");
  CAF_REQUIRE_EQUAL(resets.size(), 1u);
  auto spec = resets[0]["spec"];
  CAF_CHECK_EQUAL(spec["nodeName"], "node-1");
  CAF_CHECK_EQUAL(spec["gpuUUIDs"], json::array({"GPU-a"}));
  CAF_CHECK_EQUAL(spec["sourceEventId"], "node-1-GPU-a-48");
  // seed 000 §4.1: the group and its CR on the Node.
  auto state = control::decode_remediation_state(remediation_annotation("node-1"));
  CAF_REQUIRE(state.has_value());
  const auto* group = control::find_group(*state, "reset-GPU-a");
  CAF_REQUIRE(group != nullptr);
  CAF_CHECK_EQUAL(group->maintenance_cr, resets[0]["metadata"]["name"]);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
  CAF_CHECK_EQUAL(drain_rows("skipped") + drain_rows("succeeded"), 1u);
}

// seed 001 "Scope of Support": a node without GPU feature discovery's labels,
// whose agent found NVSwitches at the far end of an A100's NVLinks, is an
// HGX A100 (Fabric Manager): its XID 48 reboots the node, never resets one GPU.
CAF_TEST(the_agents_nvswitches_make_an_a100_reset_a_reboot) {
  settings->remediation.enabled = true;
  jobs_only = true;
  for (auto node : {"node-1", "node-2"})
    CAF_REQUIRE(
      store
        ->patch(*nodes(), "", node,
                {{"metadata", {{"labels", {{"nvidia.com/gpu.product", nullptr}}}}}},
                kube::patch_type::merge, false)
        .ok());
  start();
  self->send(fleet, gpu_facts_atom::value, std::string{"node-1"},
             agent_gpu_facts{"NVIDIA A100-SXM4-80GB", 8, 6, "575.57.08"});
  self->send(fleet, gpu_facts_atom::value, std::string{"node-2"},
             agent_gpu_facts{"NVIDIA H100 80GB HBM3", 8, 4, "580.95.05"});
  run();
  post({reset_needed("node-1", "GPU-a"), reset_needed("node-2", "GPU-b")});
  auto reboots = crs("rebootnodes");
  CAF_REQUIRE_EQUAL(reboots.size(), 1u);
  CAF_CHECK_EQUAL(reboots[0]["spec"]["nodeName"], "node-1");
  auto resets = crs("gpuresets");
  CAF_REQUIRE_EQUAL(resets.size(), 1u); // an H100 NVSwitch board resets alone
  CAF_CHECK_EQUAL(resets[0]["spec"]["nodeName"], "node-2");
}

CAF_TEST(the_four_ordering_cases_hold_through_the_mailbox) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto again = reset_needed("node-1", "GPU-a");
  again.id = "node-1-GPU-a-48-again";
  post({again});                           // case 2: same GPU, in flight → skipped
  post({reset_needed("node-1", "GPU-b")}); // case 2: another GPU → waits
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  post({reboot_needed("node-1", "GPU-c")}); // case 3: a reboot during a reset waits
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
  auto reset_a = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset_a, "Succeeded");
  advance(std::chrono::seconds{10}); // the CR poll
  // The reboot runs next; GPU-b's waiting reset was covered by it.
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  post({reset_needed("node-1", "GPU-d")}); // case 4: a reset during a reboot → covered
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  auto phases = remediation_phases();
  auto has = [&](const std::string& p) {
    return std::find(phases.begin(), phases.end(), p) != phases.end();
  };
  CAF_CHECK(has("created reset-GPU-a"));
  CAF_CHECK(has("succeeded reset-GPU-a"));
  CAF_CHECK(has("covered reset-GPU-b"));
  CAF_CHECK(has("created restart"));
  CAF_CHECK(!has("created reset-GPU-b"));
  CAF_CHECK(!has("created reset-GPU-d"));
  auto state = control::decode_remediation_state(remediation_annotation("node-1"));
  CAF_REQUIRE(state.has_value());
  const auto* covered = control::find_group(*state, "reset-GPU-d");
  CAF_REQUIRE(covered != nullptr); // recorded with the reboot's CR (case 4)
  CAF_CHECK_EQUAL(to_string(covered->kind), "RebootNode");
}

CAF_TEST(a_failed_reset_falls_back_to_a_reboot_whose_success_uncordons) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Failed", "reset_command_failed");
  advance(std::chrono::seconds{10});
  auto reboots = crs("rebootnodes");
  CAF_REQUIRE_EQUAL(reboots.size(), 1u);
  CAF_CHECK(cordoned("node-1"));
  // The janitor saw a new boot ID and the node Ready: the reboot closes the loop.
  cr_phase("rebootnodes", reboots[0]["metadata"]["name"].get<std::string>(), "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(remediation_annotation("node-1"), "");
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["active"].size(), 0u);
}

CAF_TEST(the_healthy_event_after_a_reset_releases_the_node) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK(cordoned("node-1"));
  auto healthy = xid("node-1", "GPU-a", true); // the agent read "GPU reset occurred"
  post({healthy});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(remediation_annotation("node-1"), "");
  // Verified: no escalation when the deadline would have passed.
  advance(std::chrono::seconds{3600});
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
}

CAF_TEST(a_healthy_event_before_the_reset_is_seen_done_still_verifies_it) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto support = xid("node-1", "GPU-b");
  support.id = "node-1-GPU-b-support";
  support.action = recommended_action::contact_support;
  post({support}); // keeps the node quarantined throughout
  // The reset Job logs its line before the janitor has restored the labels.
  post({xid("node-1", "GPU-a", true)});
  cr_phase("gpuresets", crs("gpuresets")[0]["metadata"]["name"].get<std::string>(),
           "Succeeded");
  advance(std::chrono::seconds{10});
  advance(settings->remediation.escalation.verify_reset_timeout + std::chrono::hours{1});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u); // no reboot under GPU-b's pods
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "verified reset-GPU-a")
            != phases.end());
}

CAF_TEST(a_reset_not_verified_in_time_escalates_to_a_reboot) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
  advance(settings->remediation.escalation.verify_reset_timeout);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
}

// seed 001 step 5: the node returns only once the CR is done (the janitor
// restored the operand labels), even when the GPU's healthy event came first.
CAF_TEST(the_node_stays_cordoned_until_its_reset_cr_is_done) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  post({xid("node-1", "GPU-a", true)}); // the Job's "GPU reset occurred" line
  CAF_CHECK(cordoned("node-1"));
  cr_phase("gpuresets", crs("gpuresets")[0]["metadata"]["name"].get<std::string>(),
           "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
}

// seed 003, proof of recovery before return: a Job on the node must pass.
CAF_TEST(a_reset_is_validated_before_the_node_returns) {
  settings->remediation.enabled = true;
  settings->remediation.validation.after_reset = true;
  jobs_only = true;
  janitor_namespace();
  start();
  post({reset_needed("node-1", "GPU-a")});
  const auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  post({xid("node-1", "GPU-a", true)});
  advance(std::chrono::seconds{10});
  CAF_CHECK(cordoned("node-1"));
  const auto job_name = control::validation_job_name(reset);
  auto job =
    store->get(*store->find_type("batch", "v1", "jobs"), "vigil-system", job_name);
  CAF_REQUIRE(job.ok());
  const auto& spec = (*job.value)["spec"]["template"]["spec"];
  CAF_CHECK_EQUAL(spec["nodeName"], "node-1");
  CAF_CHECK_EQUAL((*job.value)["metadata"]["labels"]["app.kubernetes.io/managed-by"],
                  "vigil");
  CAF_CHECK_EQUAL(spec["containers"][0]["env"][0]["value"], "GPU-a");
  advance(std::chrono::seconds{60});
  CAF_CHECK(cordoned("node-1")); // still running
  job_status(job_name, {{"succeeded", 1}});
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "validated reset-GPU-a")
            != phases.end());
  CAF_CHECK_EQUAL(settings->counters->validations_passed.load(), 1u);
}

// A reset that "succeeded" while the GPU still fails: the failed validation
// is a fault, and the reboot it climbs to comes after a full drain.
CAF_TEST(a_failed_validation_climbs_the_ladder) {
  settings->remediation.enabled = true;
  settings->remediation.validation.after_reset = true;
  jobs_only = true;
  janitor_namespace();
  start();
  post({reset_needed("node-1", "GPU-a")});
  const auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  post({xid("node-1", "GPU-a", true)});
  advance(std::chrono::seconds{10});
  job_status(control::validation_job_name(reset),
             {{"failed", 1},
              {"conditions",
               {{{"type", "Failed"},
                 {"status", "True"},
                 {"reason", "BackoffLimitExceeded"},
                 {"message", "Job has reached the specified backoff limit"}}}}});
  advance(std::chrono::seconds{10});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "validation_failed reset-GPU-a")
            != phases.end());
  CAF_CHECK_EQUAL(settings->counters->validations_failed.load(), 1u);
  const auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["uncordons"].get<int>(), 0); // never returned in between
  const auto check = summary["active"][0]["check"].get<std::string>();
  CAF_CHECK_EQUAL(check, "RemediationValidation");
}

// Found by the chaos run's auditor (uncordoned_during_cr): a control plane
// restarted while a reset ran, its fault cleared before the restart. The
// rebuilt node actor decided its quarantine before the machine took up the
// CR the journal says may still run, saw no record and uncordoned the node
// mid-reset. The CR to look for now holds the quarantine from the replay on.
CAF_TEST(a_restart_during_a_reset_whose_fault_cleared_keeps_the_node_out) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Resetting");
  post({xid("node-1", "GPU-a", true)}); // the reset's own healthy line
  CAF_REQUIRE(cordoned("node-1"));
  restart();
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(node_summary("node-1")["uncordons"].get<int>(), 0);
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
}

CAF_TEST(attempt_caps_survive_a_restart) {
  settings->remediation.enabled = true;
  settings->remediation.escalation.max_resets_per_gpu = 1;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  restart();
  // The same GPU fails again: its one reset in 24 h is spent, so a reboot.
  auto again = reset_needed("node-1", "GPU-a");
  again.id = "node-1-GPU-a-48-later";
  advance(std::chrono::seconds{3600});
  post({again});
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
}

// A cap climb whose new rung must wait out its cooldown is journaled and
// counted once: the deferred start runs the escalated request.
CAF_TEST(a_climb_deferred_by_a_cooldown_is_counted_once) {
  settings->remediation.enabled = true;
  settings->remediation.escalation.max_resets_per_gpu = 1;
  jobs_only = true;
  start();
  post({reboot_needed("node-1", "GPU-b")});
  auto reboot = crs("rebootnodes")[0]["metadata"]["name"].get<std::string>();
  cr_phase("rebootnodes", reboot, "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_REQUIRE(!cordoned("node-1"));
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  post({xid("node-1", "GPU-a", true)});
  CAF_REQUIRE(!cordoned("node-1"));
  // GPU-a fails again: its reset is spent, so a reboot, which the cooldown
  // after the first one holds back for a while.
  auto again = reset_needed("node-1", "GPU-a");
  again.id = "node-1-GPU-a-48-again";
  post({again});
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
  CAF_CHECK_EQUAL(settings->counters->escalations.load(), 1u);
  advance(settings->remediation.escalation.cooldown);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 2u);
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  CAF_CHECK_EQUAL(settings->counters->escalations.load(), 1u);
  auto phases = remediation_phases();
  CAF_CHECK_EQUAL(
    std::count_if(phases.begin(), phases.end(),
                  [](const std::string& p) { return p.rfind("escalated", 0) == 0; }),
    1);
}

CAF_TEST(replace_vm_goes_to_the_provider_hook_and_escalates_to_support_unanswered) {
  settings->remediation.enabled = true;
  settings->remediation.options.replace = control::replace_target::provider_hook;
  jobs_only = true;
  start();
  auto e = xid("node-1", "GPU-a");
  e.action = recommended_action::replace_vm;
  post({e});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("terminatenodes").size(), 0u);
  auto n = node("node-1");
  auto annotations = n["metadata"].value("annotations", json::object());
  CAF_CHECK(annotations.contains("vigil.dev/replace-requested"));
  advance(settings->remediation.escalation.verify_replace_timeout);
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "handed_to_provider replace")
            != phases.end());
  CAF_CHECK(std::find(phases.begin(), phases.end(), "manual ") != phases.end());
  CAF_CHECK(cordoned("node-1"));
}

CAF_TEST(a_dry_run_drain_keeps_the_remediation_dry_too) {
  settings->remediation.enabled = true;
  auto drain = std::make_shared<drain_settings>(*settings->drain);
  drain->dry_run = true;
  settings->drain = drain;
  jobs_only = true;
  start();
  add_pod("default", pod_object("job-a", "node-1", {"GPU-a"}));
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(!terminating("default", "job-a"));
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 0u); // the pod still holds the GPU
}

CAF_TEST(remediation_dry_run_journals_the_plan_and_creates_nothing) {
  settings->remediation.enabled = true;
  settings->remediation.dry_run = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1")); // the quarantine stage is live
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 0u);
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "created reset-GPU-a")
            != phases.end());
  CAF_CHECK_EQUAL(remediation_annotation("node-1"), "");
}

CAF_TEST(a_terminatenode_nobody_finishes_times_out_to_an_operator) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  auto e = xid("node-1", "GPU-a");
  e.action = recommended_action::replace_vm;
  post({e});
  CAF_REQUIRE_EQUAL(crs("terminatenodes").size(), 1u);
  // A replacement takes hours: the reset/reboot timeout does not apply.
  advance(settings->remediation.cr_timeout + std::chrono::seconds{10});
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "failed replace") == phases.end());
  advance(settings->remediation.terminate_timeout - settings->remediation.cr_timeout);
  phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "failed replace") != phases.end());
  CAF_CHECK(std::find(phases.begin(), phases.end(), "manual ") != phases.end());
  CAF_CHECK(cordoned("node-1"));
}

CAF_TEST(contact_support_creates_nothing_and_keeps_the_quarantine) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  auto e = xid("node-1", "GPU-a");
  e.action = recommended_action::contact_support;
  post({e});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("gpuresets").size() + crs("rebootnodes").size(), 0u);
  auto phases = remediation_phases();
  CAF_REQUIRE_EQUAL(phases.size(), 1u);
  CAF_CHECK_EQUAL(phases[0], "manual ");
  auto events = store->list(*store->find_type("", "v1", "events"), "default", {});
  CAF_REQUIRE(events.ok());
  bool told = false;
  for (const auto& ev : (*events.value)["items"])
    told = told || ev.value("reason", "") == "RemediationNeedsOperator";
  CAF_CHECK(told);
}

// issue 19: a CUSTOM event's customRecommendedAction names an operator's own
// remediation. Its CR (a CRD the operator installed) is created once the node
// is drained; its success keeps the node quarantined until the healthy event.
// The operator's CableReseat CRD installed and named for RESEAT_CABLE.
static void offer_cable_reseats(control_fixture& f) {
  f.settings->remediation.enabled = true;
  f.settings->remediation.options.custom_actions = {
    {"RESEAT_CABLE", "repair.example.com", "v1", "CableReseat", "cablereseats"}};
  f.store->register_type(
    {"repair.example.com", "v1", "cablereseats", "CableReseat", false, true, {}, true});
  f.jobs_only = true;
  f.start();
}

static health_event reseat_needed(const std::string& node, const std::string& id) {
  auto e = xid(node, "GPU-a");
  e.id = id;
  e.action = recommended_action::custom;
  e.custom_action = "RESEAT_CABLE";
  return e;
}

CAF_TEST(a_custom_action_creates_the_operators_cr_and_waits_for_the_healthy_event) {
  offer_cable_reseats(*this);
  post({reseat_needed("node-1", "reseat-1")});
  CAF_CHECK(cordoned("node-1"));
  auto reseats = crs("cablereseats", "repair.example.com", "v1");
  CAF_REQUIRE_EQUAL(reseats.size(), 1u);
  CAF_CHECK_EQUAL(reseats[0]["kind"], "CableReseat");
  CAF_CHECK_EQUAL(reseats[0]["spec"]["nodeName"], "node-1");
  CAF_CHECK_EQUAL(reseats[0]["spec"]["customAction"], "RESEAT_CABLE");
  CAF_CHECK_EQUAL(reseats[0]["spec"]["sourceEventId"], "reseat-1");
  CAF_CHECK_EQUAL(crs("rebootnodes").size() + crs("gpuresets").size(), 0u);
  // The same event again (an agent's retry) is the same group: no second CR.
  post({reseat_needed("node-1", "reseat-2")});
  CAF_CHECK_EQUAL(crs("cablereseats", "repair.example.com", "v1").size(), 1u);
  // The operator's controller follows the Job convention.
  const auto name = reseats[0]["metadata"]["name"].get<std::string>();
  cr_status("repair.example.com", "v1", "cablereseats", name,
            {{"conditions", {{{"type", "Complete"}, {"status", "True"}}}}});
  advance(std::chrono::seconds{10});
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "succeeded custom-RESEAT_CABLE")
            != phases.end());
  CAF_CHECK(cordoned("node-1")); // done is not healthy
  auto healthy = xid("node-1", "GPU-a", true);
  post({healthy});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(remediation_annotation("node-1"), "");
  advance(settings->remediation.escalation.verify_custom_timeout);
  phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "manual ") == phases.end());
}

CAF_TEST(a_failed_custom_cr_or_an_unknown_custom_name_goes_to_a_person) {
  offer_cable_reseats(*this);
  post({reseat_needed("node-1", "reseat-1")});
  auto unknown = reseat_needed("node-2", "pray-1");
  unknown.custom_action = "PRAY";
  post({unknown});
  auto reseats = crs("cablereseats", "repair.example.com", "v1");
  CAF_REQUIRE_EQUAL(reseats.size(), 1u); // none for PRAY
  cr_status("repair.example.com", "v1", "cablereseats",
            reseats[0]["metadata"]["name"].get<std::string>(),
            {{"phase", "Failed"}, {"failureReason", "cable_still_bad"}});
  advance(std::chrono::seconds{10});
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "failed custom-RESEAT_CABLE")
            != phases.end());
  // Neither climbs to a reboot vigil cannot know would help.
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
  CAF_CHECK_EQUAL(std::count(phases.begin(), phases.end(), "manual "), 2);
  CAF_CHECK_EQUAL(events_posted("RemediationNeedsOperator", "node-1"), 1u);
  CAF_CHECK_EQUAL(events_posted("RemediationNeedsOperator", "node-2"), 1u);
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(cordoned("node-2"));
}

CAF_TEST_FIXTURE_SCOPE_END()
