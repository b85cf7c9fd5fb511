#include "actors/control/rules/label_selector.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

bool selects(const std::string& selector,
             const std::map<std::string, std::string>& labels) {
  auto s = label_selector::parse(selector);
  EXPECT_TRUE(s.has_value()) << selector << ": " << s.error().to_string();
  return s.has_value() && s->matches(labels);
}

const std::map<std::string, std::string> h100{{"nvidia.com/gpu.present", "true"},
                                              {"nvidia.com/gpu.product", "H100"},
                                              {"pool", "train"}};

TEST(label_selector, equality_and_existence) {
  EXPECT_TRUE(selects("nvidia.com/gpu.present=true", h100));
  EXPECT_TRUE(selects("nvidia.com/gpu.present == true", h100));
  EXPECT_FALSE(selects("nvidia.com/gpu.present=false", h100));
  EXPECT_TRUE(selects("nvidia.com/gpu.present", h100));
  EXPECT_FALSE(selects("!nvidia.com/gpu.present", h100));
  EXPECT_TRUE(selects("!vigil.dev/opt-out", h100));
  EXPECT_TRUE(selects("pool!=infer", h100));
  EXPECT_TRUE(selects("absent!=x", h100)); // as in Kubernetes: absent is "not x"
  EXPECT_TRUE(selects("", {}));            // empty selects everything
}

TEST(label_selector, sets_and_conjunctions) {
  EXPECT_TRUE(selects("nvidia.com/gpu.product in (A100, H100)", h100));
  EXPECT_FALSE(selects("nvidia.com/gpu.product notin (A100,H100)", h100));
  EXPECT_TRUE(selects("pool notin (infer)", h100));
  EXPECT_TRUE(
    selects("nvidia.com/gpu.present=true,pool in (train,eval),!cordoned", h100));
  EXPECT_FALSE(selects("nvidia.com/gpu.present=true,pool=eval", h100));
}

TEST(label_selector, garbage_is_an_error_naming_the_requirement) {
  for (const char* bad : {"a=b,=c", "key in A100", "key in (a b)", "!", "a b", "a=(b)",
                          "key notin (x", ","}) {
    auto s = label_selector::parse(bad);
    EXPECT_FALSE(s.has_value()) << bad;
  }
  auto s = label_selector::parse("pool=train,gpu in H100");
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().to_string().find("gpu in H100"), std::string::npos)
    << s.error().to_string();
}

} // namespace
} // namespace vigil::control
