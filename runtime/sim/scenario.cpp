#include "runtime/sim/scenario.hpp"

#include <cctype>

#include <yaml-cpp/yaml.h>

namespace vigil::demo {

namespace {

// Reads a YAML tree and names the key of the first problem.
class reader {
public:
  reader(YAML::Node node, std::string path)
    : node_(std::move(node)), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  bool has(const char* key) const { return node_.IsMap() && node_[key]; }
  reader at(const char* key) const {
    // A missing key reads as null: yaml-cpp's zombie nodes throw when used.
    return reader(has(key) ? node_[key] : YAML::Node{},
                  path_.empty() ? key : path_ + "." + key);
  }
  reader item(std::size_t i) const {
    return reader(node_[i], path_ + "[" + std::to_string(i) + "]");
  }
  std::size_t size() const { return node_.IsSequence() ? node_.size() : 0; }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_map() const { return node_.IsMap(); }
  const YAML::Node& node() const { return node_; }

  failure fail(const std::string& why) const {
    return failure{path_.empty() ? "scenario" : path_, why};
  }

  expected<std::string> text() const {
    if (!node_.IsScalar())
      return fail("expected a string");
    return node_.as<std::string>();
  }
  expected<long long> number(long long low, long long high) const {
    long long v = 0;
    if (!node_.IsScalar() || !YAML::convert<long long>::decode(node_, v))
      return fail("expected a whole number");
    if (v < low || v > high)
      return fail(std::to_string(v) + " is outside " + std::to_string(low) + ".."
                  + std::to_string(high));
    return v;
  }
  expected<bool> boolean() const {
    bool v = false;
    if (!node_.IsScalar() || !YAML::convert<bool>::decode(node_, v))
      return fail("expected true or false");
    return v;
  }
  expected<std::chrono::seconds> duration() const {
    auto t = text();
    if (!t)
      return t.error();
    auto d = parse_duration(*t);
    if (!d)
      return fail("'" + *t + "' is not a duration (90s, 20m, 1h30m)");
    return *d;
  }
  /// Keys not in `known` are errors: a typo must not pass silently.
  status only(std::initializer_list<const char*> known) const {
    if (!node_.IsMap())
      return fail("expected a mapping");
    for (const auto& kv : node_) {
      if (!kv.first.IsScalar())
        return fail("has a key that is not a plain string");
      const auto key = kv.first.as<std::string>();
      bool ok = false;
      for (const char* k : known)
        ok = ok || key == k;
      if (!ok)
        return at(key.c_str()).fail("unknown key");
    }
    return ok();
  }

private:
  YAML::Node node_;
  std::string path_;
};

#define VIGIL_TRY(var, expr)                                                             \
  auto var = (expr);                                                                     \
  if (!var)                                                                              \
    return var.error();

expected<std::vector<int>> number_list(const reader& r, long long low, long long high) {
  std::vector<int> out;
  if (!r.is_sequence()) {
    VIGIL_TRY(one, r.number(low, high));
    out.push_back(static_cast<int>(*one));
    return out;
  }
  for (std::size_t i = 0; i < r.size(); ++i) {
    VIGIL_TRY(v, r.item(i).number(low, high));
    out.push_back(static_cast<int>(*v));
  }
  if (out.empty())
    return r.fail("is empty");
  return out;
}

expected<scenario_action> parse_action(const reader& r, const scenario& s) {
  static const std::initializer_list<const char*> kinds = {
    "xid", "nic_down", "nic_up", "nic_flap", "fail_reset", "fail_validation"};
  if (auto st = r.only(
        {"at", "xid", "nic_down", "nic_up", "nic_flap", "fail_reset", "fail_validation"});
      !st)
    return st.error();
  scenario_action a;
  if (r.has("at")) {
    VIGIL_TRY(at, r.at("at").duration());
    a.at = *at;
  }
  const char* chosen = nullptr;
  for (const char* k : kinds)
    if (r.has(k)) {
      if (chosen != nullptr)
        return r.fail(std::string("has both ") + chosen + " and " + k);
      chosen = k;
    }
  if (chosen == nullptr)
    return r.fail(
      "names no action (xid, nic_down, nic_up, nic_flap, fail_reset, fail_validation)");
  const reader body = r.at(chosen);
  const std::string what = chosen;
  if (what == "xid") {
    a.what = scenario_action::kind::xid;
    if (auto st = body.only({"node", "gpu", "codes"}); !st)
      return st.error();
  } else if (what == "fail_reset") {
    a.what = scenario_action::kind::fail_reset;
    if (auto st = body.only({"node", "gpu"}); !st)
      return st.error();
  } else if (what == "fail_validation") {
    a.what = scenario_action::kind::fail_validation;
    if (auto st = body.only({"node"}); !st)
      return st.error();
  } else {
    a.what = what == "nic_down" ? scenario_action::kind::nic_down
             : what == "nic_up" ? scenario_action::kind::nic_up
                                : scenario_action::kind::nic_flap;
    if (auto st = body.only({"node", "nodes", "nic", "times", "every"}); !st)
      return st.error();
  }
  const char* node_key = body.has("nodes") ? "nodes" : "node";
  if (!body.has(node_key))
    return body.at("node").fail("is required");
  VIGIL_TRY(nodes, number_list(body.at(node_key), 1, s.nodes));
  a.nodes = *nodes;
  if (a.what == scenario_action::kind::xid
      || a.what == scenario_action::kind::fail_reset) {
    if (!body.has("gpu"))
      return body.at("gpu").fail("is required");
    VIGIL_TRY(gpu, body.at("gpu").number(0, 7));
    a.gpu = static_cast<int>(*gpu);
  }
  if (a.what == scenario_action::kind::xid) {
    if (!body.has("codes"))
      return body.at("codes").fail("is required");
    VIGIL_TRY(codes, number_list(body.at("codes"), 1, 1000));
    a.codes = *codes;
  }
  if (body.has("nic")) {
    VIGIL_TRY(nic, body.at("nic").number(0, 7));
    a.nic = static_cast<int>(*nic);
  }
  if (body.has("times")) {
    VIGIL_TRY(times, body.at("times").number(1, 100));
    a.times = static_cast<int>(*times);
  }
  if (body.has("every")) {
    VIGIL_TRY(every, body.at("every").duration());
    a.every = *every;
  }
  return a;
}

expected<step_expectations> parse_expectations(const reader& r, const scenario& s) {
  step_expectations e;
  if (auto st = r.only({"evicted", "remediations", "cordoned", "quarantined",
                        "fabric_incidents", "cordoned_during"});
      !st)
    return st.error();
  if (r.has("evicted")) {
    const auto list = r.at("evicted");
    if (!list.is_sequence() && !list.node().IsNull())
      return list.fail("expected a list of namespace/pod");
    std::vector<std::string> pods;
    for (std::size_t i = 0; i < list.size(); ++i) {
      VIGIL_TRY(pod, list.item(i).text());
      if (pod->find('/') == std::string::npos)
        return list.item(i).fail("expected namespace/pod");
      pods.push_back(*pod);
    }
    e.evicted = pods;
  }
  if (r.has("remediations")) {
    const auto list = r.at("remediations");
    if (!list.is_sequence() && !list.node().IsNull())
      return list.fail("expected a list");
    std::vector<expected_remediation> crs;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto item = list.item(i);
      if (auto st = item.only({"kind", "node", "gpu", "outcome"}); !st)
        return st.error();
      expected_remediation x;
      VIGIL_TRY(kind, item.at("kind").text());
      if (*kind != "GPUReset" && *kind != "RebootNode" && *kind != "TerminateNode")
        return item.at("kind").fail("'" + *kind
                                    + "' is not GPUReset, RebootNode or TerminateNode");
      x.kind = *kind;
      VIGIL_TRY(node, item.at("node").number(1, s.nodes));
      x.node = static_cast<int>(*node);
      if (item.has("gpu")) {
        VIGIL_TRY(gpu, item.at("gpu").number(0, 7));
        x.gpu = static_cast<int>(*gpu);
      }
      if (item.has("outcome")) {
        VIGIL_TRY(outcome, item.at("outcome").text());
        x.outcome = *outcome;
      }
      crs.push_back(x);
    }
    e.remediations = crs;
  }
  if (r.has("cordoned")) {
    const auto map = r.at("cordoned");
    if (!map.is_map())
      return map.fail("expected a mapping of node number to true/false");
    for (const auto& kv : map.node()) {
      if (!kv.first.IsScalar())
        return map.fail("has a key that is not a node number");
      const auto key = kv.first.as<std::string>();
      const reader value(kv.second, map.path() + "." + key);
      VIGIL_TRY(node, reader(kv.first, map.path() + "." + key).number(1, s.nodes));
      VIGIL_TRY(flag, value.boolean());
      e.cordoned[static_cast<int>(*node)] = *flag;
    }
  }
  if (r.has("quarantined")) {
    VIGIL_TRY(n, r.at("quarantined").number(0, s.nodes));
    e.quarantined = static_cast<int>(*n);
  }
  if (r.has("cordoned_during")) {
    const auto list = r.at("cordoned_during");
    if (!list.is_sequence() && !list.node().IsNull())
      return list.fail("expected a list of node numbers");
    std::vector<int> nodes;
    for (std::size_t i = 0; i < list.size(); ++i) {
      VIGIL_TRY(n, list.item(i).number(1, s.nodes));
      nodes.push_back(static_cast<int>(*n));
    }
    e.cordoned_during = nodes;
  }
  if (r.has("fabric_incidents")) {
    VIGIL_TRY(n, r.at("fabric_incidents").number(0, 1000));
    e.fabric_incidents = static_cast<int>(*n);
  }
  return e;
}

} // namespace

std::optional<std::chrono::seconds> parse_duration(const std::string& text) {
  if (text.empty())
    return std::nullopt;
  std::int64_t total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    std::int64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      value = value * 10 + (text[i] - '0');
      if (value > 10'000'000)
        return std::nullopt;
      ++i;
    }
    if (i == start || i == text.size())
      return std::nullopt;
    switch (text[i++]) {
      case 'h': total += value * 3600; break;
      case 'm': total += value * 60; break;
      case 's': total += value; break;
      default: return std::nullopt;
    }
  }
  return std::chrono::seconds{total};
}

namespace {

expected<scenario> parse_scenario_tree(const YAML::Node& root,
                                       const scenario_overrides& overrides);

} // namespace

expected<scenario> parse_scenario(const std::string& yaml_text,
                                  const scenario_overrides& overrides) {
  try {
    return parse_scenario_tree(YAML::Load(yaml_text), overrides);
  } catch (const YAML::Exception& e) {
    // Not valid YAML, or a shape the readers above did not foresee: an error,
    // never a crash.
    return failure{"scenario", "is not valid YAML: " + std::string(e.what())};
  }
}

namespace {

// A step's virtual time is bounded: time points stay far from overflow.
constexpr std::chrono::seconds max_step = std::chrono::hours{24};

expected<scenario> parse_scenario_tree(const YAML::Node& root,
                                       const scenario_overrides& overrides) {
  const reader r(root, "");
  if (auto st = r.only({"name", "nodes", "seed", "jobs", "steps"}); !st)
    return st.error();
  scenario s;
  if (r.has("name")) {
    VIGIL_TRY(name, r.at("name").text());
    s.name = *name;
  }
  if (r.has("nodes")) {
    VIGIL_TRY(nodes, r.at("nodes").number(1, 4096));
    s.nodes = static_cast<int>(*nodes);
  }
  if (r.has("seed")) {
    VIGIL_TRY(seed, r.at("seed").number(0, std::numeric_limits<long long>::max()));
    s.seed = static_cast<std::uint64_t>(*seed);
  }
  // Before the steps: their node numbers are checked against this size.
  if (overrides.nodes)
    s.nodes = *overrides.nodes;
  if (overrides.seed)
    s.seed = *overrides.seed;
  if (r.has("jobs")) {
    // jobs: {reset: [1m, 5m], reboot: [10m, 30m]}: how long simulated Jobs run.
    const auto jobs = r.at("jobs");
    if (auto st = jobs.only({"reset", "reboot"}); !st)
      return st.error();
    for (auto [key, range] :
         {std::pair<const char*, duration_range*>{"reset", &s.reset_job},
          {"reboot", &s.reboot_job}}) {
      if (!jobs.has(key))
        continue;
      const auto pair = jobs.at(key);
      if (pair.size() != 2)
        return pair.fail("expected [shortest, longest], e.g. [1m, 5m]");
      VIGIL_TRY(low, pair.item(0).duration());
      VIGIL_TRY(high, pair.item(1).duration());
      if (*low > *high || *high > max_step)
        return pair.fail("needs shortest <= longest <= 24h");
      *range = {*low, *high};
    }
  }
  const auto steps = r.at("steps");
  if (!steps.is_sequence() || steps.size() == 0)
    return steps.fail("expected a non-empty list of steps");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto item = steps.item(i);
    if (auto st = item.only({"name", "do", "run_for", "expect"}); !st)
      return st.error();
    scenario_step step;
    VIGIL_TRY(name, item.at("name").text());
    step.name = *name;
    if (item.has("run_for")) {
      VIGIL_TRY(run_for, item.at("run_for").duration());
      if (*run_for > max_step || run_for->count() == 0)
        return item.at("run_for").fail("must be between 1s and 24h");
      step.run_for = *run_for;
    }
    const auto actions = item.at("do");
    if (item.has("do") && !actions.is_sequence())
      return actions.fail("expected a list of actions");
    for (std::size_t a = 0; a < actions.size(); ++a) {
      VIGIL_TRY(action, parse_action(actions.item(a), s));
      // A flap's last change must fall inside the step too.
      const auto last = action->what == scenario_action::kind::nic_flap
                          ? action->at + (2 * action->times - 1) * action->every
                          : action->at;
      if (last > step.run_for)
        return actions.item(a).fail("ends after the step's run_for ("
                                    + std::to_string(last.count()) + "s > "
                                    + std::to_string(step.run_for.count()) + "s)");
      step.actions.push_back(*action);
    }
    if (item.has("expect")) {
      VIGIL_TRY(expect, parse_expectations(item.at("expect"), s));
      step.expect = *expect;
    }
    s.steps.push_back(std::move(step));
  }
  return s;
}

} // namespace

const std::string& builtin_scenario_yaml() {
  static const std::string text =
    R"(# The built-in scenario of `vigil demo`.
name: five faults on a 16-node H100 cluster
nodes: 16
seed: 1
jobs: {reset: [1m, 5m], reboot: [10m, 30m]}   # how long simulated Jobs run
steps:
  - name: XID 48 (DBE) on one GPU - only its pod drained, the GPU reset, node back
    do:
      - xid: {node: 3, gpu: 2, codes: [48]}
    run_for: 20m
    expect:
      evicted: [inference/infer-gpu-node-03-gpu2]
      remediations: [{kind: GPUReset, node: 3, gpu: 2, outcome: Succeeded}]
      cordoned: {3: false}
      cordoned_during: [3]
      quarantined: 0
  - name: XID 79 (fell off the bus) - full drain, reboot, recovery
    do:
      - xid: {node: 4, gpu: 5, codes: [79]}
    run_for: 50m
    expect:
      evicted: [training/train-gpu-node-04]
      remediations: [{kind: RebootNode, node: 4, outcome: Succeeded}]
      cordoned: {4: false}
      cordoned_during: [4]
      quarantined: 0
  - name: a NIC port flapping three times - REPLACE_VM, node stays out
    do:
      - nic_flap: {node: 5, nic: 1, times: 3, every: 20s}
    run_for: 15m
    expect:
      remediations: [{kind: TerminateNode, node: 5}]
      cordoned: {5: true}
      cordoned_during: [5]
      quarantined: 1
  - name: application XIDs 13, 31, 43 - the job's fault, no action
    do:
      - xid: {node: 6, gpu: 1, codes: [13, 31, 43]}
    run_for: 5m
    expect:
      evicted: []
      remediations: []
      cordoned: {6: false}
      cordoned_during: []
      quarantined: 1
  - name: NIC ports down on six nodes at once - one fabric incident, no mass quarantine
    do:
      - nic_down: {nodes: [7, 8, 9, 10, 11, 12], nic: 3}
      - at: 2m
        nic_up: {nodes: [7, 8, 9, 10, 11, 12], nic: 3}
    run_for: 5m
    expect:
      evicted: []
      remediations: []
      fabric_incidents: 1
      cordoned_during: []
      cordoned: {7: false, 8: false, 9: false, 10: false, 11: false, 12: false}
      quarantined: 1
)";
  return text;
}

} // namespace vigil::demo
