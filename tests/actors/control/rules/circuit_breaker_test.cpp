#include "actors/control/rules/circuit_breaker.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1761219482, 0);

std::string node(int i) {
  return "node" + std::to_string(i);
}

TEST(circuit_breaker, trips_at_the_percentage_threshold_and_not_before) {
  circuit_breaker breaker; // 50 % of GPU nodes in 5 min
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(breaker.admit_cordon(node(i), 10, t0 + i * 1s), breaker_refusal::none);
  EXPECT_FALSE(breaker.tripped());
  EXPECT_EQ(breaker.admit_cordon(node(5), 10, t0 + 10s), breaker_refusal::trips_now);
  EXPECT_TRUE(breaker.tripped());
  EXPECT_EQ(breaker.tripped_at(), t0 + 10s);
  EXPECT_NE(breaker.trip_reason().find("6 of 10"), std::string::npos);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 10s), 5u);
}

TEST(circuit_breaker, trips_at_the_node_count_threshold) {
  breaker_config config;
  config.max_cordoned_percent = 100;
  config.max_cordoned_nodes = 2;
  circuit_breaker breaker(config);
  EXPECT_EQ(breaker.admit_cordon(node(0), 100, t0), breaker_refusal::none);
  EXPECT_EQ(breaker.admit_cordon(node(1), 100, t0), breaker_refusal::none);
  EXPECT_EQ(breaker.admit_cordon(node(2), 100, t0), breaker_refusal::trips_now);
}

// Sharded, the window is fed every replica's cordons from the journal's
// tail, and another replica's clock may stamp a cordon before the newest
// counted here: it still leaves the window at its own time.
TEST(circuit_breaker, a_cordon_restored_out_of_order_leaves_the_window_in_time) {
  breaker_config config;
  config.max_cordoned_percent = 100;
  circuit_breaker breaker(config); // a 5-minute window
  breaker.restore_cordon(t0 + 2min, node(0));
  breaker.restore_cordon(t0, node(1));        // older than node(0)'s
  breaker.restore_cordon(t0 + 3min, node(1)); // counted once, at its first time
  EXPECT_EQ(breaker.cordons_in_window(t0 + 4min), 2u);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 5min), 1u); // node(1) left first
  EXPECT_EQ(breaker.cordons_in_window(t0 + 7min), 0u);
  // A reset forgets what came before it, also a cordon that arrives later
  // (another replica's, committed after the reset row) stamped before it.
  breaker.restore_cordon(t0 + 7min, node(2));
  breaker.reset(t0 + 8min);
  breaker.restore_cordon(t0 + 7min, node(3));
  breaker.restore_cordon(t0 + 9min, node(4));
  EXPECT_EQ(breaker.cordons_in_window(t0 + 9min), 1u);
}

TEST(circuit_breaker, utilisation_is_the_share_of_the_tighter_limit_used) {
  circuit_breaker breaker; // 50 % of 10 GPU nodes: 5 cordons allowed
  EXPECT_DOUBLE_EQ(breaker.utilisation(10, t0), 0.0);
  for (int i = 0; i < 4; ++i)
    breaker.admit_cordon(node(i), 10, t0);
  EXPECT_DOUBLE_EQ(breaker.utilisation(10, t0), 0.8);
  breaker.admit_cordon(node(4), 10, t0);
  EXPECT_DOUBLE_EQ(breaker.utilisation(10, t0), 1.0); // the next one trips
  EXPECT_EQ(breaker.admit_cordon(node(5), 10, t0), breaker_refusal::trips_now);
  EXPECT_DOUBLE_EQ(breaker.utilisation(10, t0 + 6min), 0.0); // the window moved on

  breaker_config config;
  config.max_cordoned_percent = 100;
  config.max_cordoned_nodes = 4; // tighter than 100 % of 100 nodes
  circuit_breaker counted(config);
  counted.admit_cordon(node(0), 100, t0);
  EXPECT_DOUBLE_EQ(counted.utilisation(100, t0), 0.25);
  // 1 % of 50 nodes allows no cordon at all: any cordon in the window is full use.
  config.max_cordoned_percent = 1;
  config.max_cordoned_nodes.reset();
  circuit_breaker small(config);
  EXPECT_DOUBLE_EQ(small.utilisation(50, t0), 0.0);
}

TEST(circuit_breaker, cordons_leave_the_window) {
  circuit_breaker breaker;
  for (int i = 0; i < 5; ++i)
    breaker.admit_cordon(node(i), 10, t0);
  // Exactly one window later the first five no longer count.
  EXPECT_EQ(breaker.admit_cordon(node(5), 10, t0 + 5min), breaker_refusal::none);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 5min), 1u);
  EXPECT_FALSE(breaker.tripped());
}

TEST(circuit_breaker, the_same_node_counts_once) {
  circuit_breaker breaker;
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(breaker.admit_cordon(node(0), 2, t0 + i * 1s), breaker_refusal::none);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 10s), 1u);
}

// A node whose cordon left the window counts again, once, when cordoned
// anew; after a reset too (restored or admitted).
TEST(circuit_breaker, a_node_out_of_the_window_counts_again) {
  circuit_breaker breaker;
  breaker.admit_cordon(node(0), 100, t0);
  breaker.admit_cordon(node(0), 100, t0 + 6min);
  breaker.admit_cordon(node(0), 100, t0 + 7min);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 7min), 1u);
  breaker.reset(t0 + 8min);
  breaker.restore_cordon(t0 + 9min, node(0));
  breaker.restore_cordon(t0 + 9min, node(0));
  breaker.admit_cordon(node(0), 100, t0 + 10min);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 10min), 1u);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 14min), 0u);
  breaker.admit_cordon(node(0), 100, t0 + 15min);
  EXPECT_EQ(breaker.cordons_in_window(t0 + 15min), 1u);
}

TEST(circuit_breaker, tripped_is_sticky_and_blocks_everything_until_reset) {
  breaker_config config;
  config.max_cordoned_nodes = 0;
  circuit_breaker breaker(config);
  EXPECT_EQ(breaker.admit_cordon(node(0), 10, t0), breaker_refusal::trips_now);
  EXPECT_EQ(breaker.admit_cordon(node(1), 10, t0 + 24h), breaker_refusal::tripped);
  EXPECT_EQ(breaker.admit_drain(), breaker_refusal::tripped);
  EXPECT_EQ(breaker.admit_remediation(node(1), "rack-a"), breaker_refusal::tripped);
  breaker.reset();
  EXPECT_FALSE(breaker.tripped());
  EXPECT_EQ(breaker.admit_drain(), breaker_refusal::none);
  EXPECT_EQ(breaker.admit_remediation(node(1), "rack-a"), breaker_refusal::none);
}

TEST(circuit_breaker, pool_budget_caps_concurrent_remediations) {
  breaker_config config;
  config.max_concurrent_per_pool = 2;
  circuit_breaker breaker(config);
  EXPECT_EQ(breaker.admit_remediation(node(0), "rack-a"), breaker_refusal::none);
  EXPECT_EQ(breaker.admit_remediation(node(1), "rack-a"), breaker_refusal::none);
  EXPECT_EQ(breaker.admit_remediation(node(2), "rack-a"), breaker_refusal::pool_budget);
  EXPECT_EQ(breaker.admit_remediation(node(0), "rack-a"), breaker_refusal::none);
  EXPECT_EQ(breaker.admit_remediation(node(3), "rack-b"), breaker_refusal::none);
  EXPECT_EQ(breaker.in_flight("rack-a"), 2u);
  breaker.finish_remediation(node(0));
  EXPECT_EQ(breaker.admit_remediation(node(2), "rack-a"), breaker_refusal::none);
  EXPECT_FALSE(breaker.tripped()); // a full pool does not trip the breaker
}

TEST(circuit_breaker, pool_comes_from_the_label) {
  std::map<std::string, std::string> labels{{"topology.kubernetes.io/rack", "r7"}};
  EXPECT_EQ(pool_of(labels, breaker_config{}.pool_label), "r7");
  EXPECT_EQ(pool_of({}, breaker_config{}.pool_label), "");
}

} // namespace
} // namespace vigil::control
