#include "runtime/metrics/metrics.hpp"

#include <gtest/gtest.h>

namespace vigil::metrics {
namespace {

// Families built from a snapshot come out in the Prometheus text format the
// library writes: HELP and TYPE once per family, labels escaped, integral
// values without a decimal point.
TEST(metrics, snapshot_families_come_out_in_the_text_format) {
  family_list families;
  families.push_back(counter("vigil_events_received_total", "events received", 7));
  families.push_back(gauge("vigil_breaker_utilisation", "share used", 0.8));
  families.push_back(family_builder("vigil_mailbox_depth", "messages waiting",
                                    prometheus::MetricType::Gauge)
                       .sample(3, {{"actor", "fleet"}})
                       .sample(0, {{"actor", "we\"ird\\"}})
                       .build());
  const auto text = exposition(families);
  EXPECT_NE(text.find("# HELP vigil_events_received_total events received\n"
                      "# TYPE vigil_events_received_total counter\n"
                      "vigil_events_received_total 7\n"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("vigil_breaker_utilisation 0.8\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE vigil_mailbox_depth gauge\n"
                      "vigil_mailbox_depth{actor=\"fleet\"} 3\n"
                      "vigil_mailbox_depth{actor=\"we\\\"ird\\\\\"} 0\n"),
            std::string::npos)
    << text;
}

TEST(metrics, append_keeps_the_order_of_both_lists) {
  family_list all{counter("a_total", "a", 1)};
  append(all, {counter("b_total", "b", 2), gauge("c", "c", 3)});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "a_total");
  EXPECT_EQ(all[2].name, "c");
  EXPECT_EQ(exposition({}), "");
}

} // namespace
} // namespace vigil::metrics
