#include "actors/control/remediation/remediation_state.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

// seed 000 §4.1's example, with hex-valid UUIDs.
constexpr std::string_view seed_example = R"({
  "equivalenceGroups": {
    "restart": {
      "kind": "RebootNode",
      "maintenanceCR": "maintenance-10.54.108.38-6915f6bd0ecfb2f4a6c75575",
      "createdAt": "2025-11-13T17:18:32.163469826Z"
    },
    "reset-GPU-455d8f70-2051-db6c-0430-ffc457bff834": {
      "kind": "GPUReset",
      "maintenanceCR": "maintenance-10.54.108.38-6915f6bd0ecfb2f4a6c75575",
      "createdAt": "2025-11-13T17:19:32.163469826Z"
    }
  }
})";

failure decode_failure(std::string_view text) {
  auto decoded = decode_remediation_state(text);
  EXPECT_FALSE(decoded.has_value());
  return decoded.has_value() ? failure{} : decoded.error();
}

TEST(remediation_state, decodes_the_seed_example) {
  auto state = decode_remediation_state(seed_example);
  ASSERT_TRUE(state.has_value()) << state.error().to_string();
  ASSERT_EQ(state->groups.size(), 2u);
  const auto* restart = find_group(*state, "restart");
  ASSERT_NE(restart, nullptr);
  EXPECT_EQ(restart->kind, remediation_kind::reboot_node);
  EXPECT_EQ(restart->maintenance_cr, "maintenance-10.54.108.38-6915f6bd0ecfb2f4a6c75575");
  EXPECT_EQ(format_rfc3339(restart->created_at), "2025-11-13T17:18:32.163469826Z");
  const auto* reset =
    find_group(*state, "reset-GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  ASSERT_NE(reset, nullptr);
  EXPECT_EQ(reset->kind, remediation_kind::gpu_reset);
  EXPECT_EQ(find_group(*state, "reset-GPU-other"), nullptr);
}

TEST(remediation_state, round_trips) {
  remediation_state state;
  remember(
    state, "restart",
    {remediation_kind::reboot_node, "vigil-reboot-n1-1", from_unix(1'700'000'000, 5)});
  // seed 000 §4.3 case 4: a covered reset is recorded under the reboot's CR.
  remember(
    state, reset_group("GPU-1"),
    {remediation_kind::reboot_node, "vigil-reboot-n1-1", from_unix(1'700'000'001, 0)});
  auto text = encode_remediation_state(state);
  EXPECT_EQ(text.find("equivalenceGroups"), 2u);
  auto back = decode_remediation_state(text);
  ASSERT_TRUE(back.has_value()) << back.error().to_string();
  EXPECT_EQ(*back, state);
}

TEST(remediation_state, remember_replaces_an_older_entry) {
  remediation_state state;
  remember(state, "restart", {remediation_kind::reboot_node, "old", {}});
  remember(state, "restart", {remediation_kind::reboot_node, "new", {}});
  EXPECT_EQ(state.groups.size(), 1u);
  EXPECT_EQ(find_group(state, "restart")->maintenance_cr, "new");
}

TEST(remediation_state, empty_and_unknown_fields_are_accepted) {
  auto empty = decode_remediation_state("");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->groups.empty());
  auto no_groups = decode_remediation_state(R"({"other":1})");
  ASSERT_TRUE(no_groups.has_value());
  auto extra = decode_remediation_state(
    R"({"equivalenceGroups":{"restart":{"kind":"RebootNode","maintenanceCR":"x",)"
    R"("createdAt":"2025-01-01T00:00:00Z","note":"from a newer vigil"}}})");
  ASSERT_TRUE(extra.has_value()) << extra.error().to_string();
}

TEST(remediation_state, failures_name_the_field) {
  EXPECT_EQ(decode_failure("{").what, "not valid JSON");
  EXPECT_EQ(decode_failure("[]").what, "must be a JSON object");
  EXPECT_EQ(decode_failure(R"({"equivalenceGroups":[]})").where, "equivalenceGroups");
  auto bad_kind = decode_failure(
    R"({"equivalenceGroups":{"restart":{"kind":"Nope","maintenanceCR":"x",)"
    R"("createdAt":"2025-01-01T00:00:00Z"}}})");
  EXPECT_EQ(bad_kind.where, "equivalenceGroups.restart.kind");
  auto missing = decode_failure(
    R"({"equivalenceGroups":{"restart":{"kind":"RebootNode","createdAt":"x"}}})");
  EXPECT_EQ(missing.where, "equivalenceGroups.restart.maintenanceCR");
  EXPECT_EQ(missing.what, "missing");
  auto bad_time = decode_failure(
    R"({"equivalenceGroups":{"restart":{"kind":"RebootNode","maintenanceCR":"x",)"
    R"("createdAt":"yesterday"}}})");
  EXPECT_EQ(bad_time.where, "equivalenceGroups.restart.createdAt");
  auto not_string = decode_failure(
    R"({"equivalenceGroups":{"restart":{"kind":1,"maintenanceCR":"x","createdAt":"x"}}})");
  EXPECT_EQ(not_string.what, "must be a string");
}

} // namespace
} // namespace vigil::control
