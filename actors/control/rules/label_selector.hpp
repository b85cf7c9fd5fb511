// A Kubernetes label selector in its string form ("a=b,c!=d,e in (x,y),!f"),
// for the breaker's GPU-node selector (the GPU nodes its percentage limit
// counts). Pure: parsed once at startup, matched per Node.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::control {

class label_selector {
public:
  /// The API server's syntax: requirements joined by commas, each `key`,
  /// `!key`, `key=value`, `key==value`, `key!=value`, `key in (v1,v2)` or
  /// `key notin (v1,v2)`. Empty selects everything. The failure names the
  /// requirement that does not parse.
  static expected<label_selector> parse(std::string_view text);

  /// Every requirement holds for `labels` (`!=` and `notin` hold when the
  /// label is absent, as in Kubernetes).
  bool matches(const std::map<std::string, std::string>& labels) const;

  bool empty() const { return requirements_.empty(); }

private:
  struct requirement {
    enum class op { exists, not_exists, in, not_in };
    std::string key;
    op what = op::exists;
    std::vector<std::string> values; ///< in / not_in (= and != are one value)
  };
  static expected<requirement> parse_requirement(std::string_view text);

  std::vector<requirement> requirements_;
};

} // namespace vigil::control
