#include "actors/control/remediation/validation_job.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::control {
namespace {

using nlohmann::json;

remediation_command::run_validation reset_run() {
  remediation_command::run_validation run;
  run.request.plan = plan_remediation(recommended_action::component_reset, "GPU-a",
                                      node_gpu_facts{"NVIDIA H100 80GB HBM3"});
  run.request.event_id = "e1";
  run.job = "vigil-validate-gpureset-node-1-x";
  run.gpus = {"GPU-a"};
  run.expected_gpus = 8;
  return run;
}

TEST(validation_job, is_pinned_to_the_node_privileged_and_vigils_own) {
  validation_job_options options;
  options.reset.command = {"/opt/smoke-test"};
  auto job =
    build_validation_job(reset_run(), "node-1", options, std::chrono::seconds{1800});
  EXPECT_EQ(job["metadata"]["namespace"], "vigil-system");
  EXPECT_EQ(job["metadata"]["labels"]["app.kubernetes.io/managed-by"], "vigil");
  EXPECT_EQ(job["spec"]["backoffLimit"], 0);
  EXPECT_EQ(job["spec"]["activeDeadlineSeconds"], 1800);
  const auto& pod = job["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeName"], "node-1");
  EXPECT_EQ(pod["tolerations"][0]["operator"], "Exists");
  const auto& c = pod["containers"][0];
  EXPECT_EQ(c["command"], json::array({"/opt/smoke-test"}));
  EXPECT_TRUE(c["securityContext"]["privileged"].get<bool>());
  EXPECT_EQ(c["env"][0], (json{{"name", "VIGIL_GPU_UUIDS"}, {"value", "GPU-a"}}));
  EXPECT_EQ(c["env"][1], (json{{"name", "VIGIL_EXPECTED_GPUS"}, {"value", "8"}}));
  // The reboot's spec (default command) is used for a reboot.
  auto reboot = reset_run();
  reboot.request.plan = plan_remediation(recommended_action::restart_bm, "", {});
  auto rjob = build_validation_job(reboot, "node-1", options, std::chrono::seconds{60});
  EXPECT_EQ(rjob["spec"]["template"]["spec"]["containers"][0]["command"],
            json(default_validation_command()));
}

TEST(validation_job, its_status_reads_as_running_passed_or_failed) {
  auto read = [](json status) {
    json job = {{"metadata", {{"name", "j"}}}};
    if (!status.is_null())
      job["status"] = std::move(status);
    auto p = read_validation_job(job);
    EXPECT_TRUE(p.has_value());
    return *p;
  };
  EXPECT_FALSE(read(nullptr).done);
  EXPECT_FALSE(read({{"active", 1}}).done);
  auto passed = read({{"succeeded", 1}});
  EXPECT_TRUE(passed.done && passed.passed);
  auto failed = read({{"failed", 1},
                      {"conditions",
                       {{{"type", "Failed"},
                         {"status", "True"},
                         {"reason", "DeadlineExceeded"},
                         {"message", "Job was active longer than specified"}}}}});
  EXPECT_TRUE(failed.done);
  EXPECT_FALSE(failed.passed);
  EXPECT_EQ(failed.message, "DeadlineExceeded: Job was active longer than specified");
  EXPECT_FALSE(read_validation_job(json::array()).has_value());
}

} // namespace
} // namespace vigil::control
