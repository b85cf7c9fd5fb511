#include "runtime/config.hpp"

#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace vigil {

namespace {

// Reads the keys of one YAML mapping into typed fields, remembering which keys
// it consumed so that anything left over is reported as unknown.
class section_reader {
public:
  section_reader(YAML::Node node, std::string path, std::vector<failure>& errors)
    : node_(std::move(node)), path_(std::move(path)), errors_(errors) {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
      fail(path_, "expected a mapping");
  }

  section_reader section(const char* key) {
    consumed_.insert(key);
    const YAML::Node& node = node_;
    return section_reader(valid() ? node[key] : YAML::Node{}, join(key), errors_);
  }

  void read(const char* key, std::string& out) {
    if (auto value = take(key)) {
      if (!value->IsScalar())
        fail(join(key), "expected a string");
      else
        out = value->Scalar();
    }
  }

  template <class Int>
  void read(const char* key, Int& out, Int min, Int max) {
    auto value = take(key);
    if (!value)
      return;
    long long parsed = 0;
    if (!value->IsScalar() || !YAML::convert<long long>::decode(*value, parsed)) {
      fail(join(key), "expected an integer");
      return;
    }
    if (parsed < static_cast<long long>(min) || parsed > static_cast<long long>(max)) {
      fail(join(key), std::to_string(parsed) + " is out of range [" + std::to_string(min)
                        + ", " + std::to_string(max) + "]");
      return;
    }
    out = static_cast<Int>(parsed);
  }

  void read_one_of(const char* key, std::string& out,
                   std::initializer_list<const char*> allowed) {
    std::string value = out;
    read(key, value);
    for (const char* a : allowed)
      if (value == a) {
        out = value;
        return;
      }
    std::string list;
    for (const char* a : allowed)
      list += list.empty() ? a : std::string(", ") + a;
    fail(join(key), "'" + value + "' is not one of: " + list);
  }

  /// Reports the keys nobody asked for; call after reading every field.
  void finish() {
    if (!valid())
      return;
    for (const auto& kv : node_) {
      const auto key = kv.first.Scalar();
      if (consumed_.count(key) == 0)
        fail(join(key.c_str()), "unknown key");
    }
  }

private:
  bool valid() const { return node_.IsDefined() && node_.IsMap(); }

  // The value under `key`, or nothing when it is absent or null.
  std::optional<YAML::Node> take(const char* key) {
    consumed_.insert(key);
    if (!valid())
      return std::nullopt;
    const YAML::Node& node = node_;
    auto value = node[key];
    if (!value.IsDefined() || value.IsNull())
      return std::nullopt;
    return value;
  }

  std::string join(const char* key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  void fail(std::string where, std::string what) {
    errors_.push_back(failure{std::move(where), std::move(what)});
  }

  YAML::Node node_;
  std::string path_;
  std::vector<failure>& errors_;
  std::set<std::string> consumed_;
};

void read_log(section_reader s, log_config& c) {
  std::string format = c.format == log_format::json ? "json" : "text";
  s.read_one_of("format", format, {"json", "text"});
  c.format = format == "text" ? log_format::text : log_format::json;
  s.read_one_of("level", c.level,
                {"trace", "debug", "info", "warn", "error", "critical", "off"});
  s.finish();
}

void read_runtime(section_reader s, runtime_config& c) {
  s.read("scheduler_threads", c.scheduler_threads, 0u, 256u);
  s.read("shutdown_grace_ms", c.shutdown_grace_ms, 0u, 600000u);
  s.finish();
}

void read_journal(section_reader s, journal_config& c, std::vector<failure>& errors) {
  s.read("url", c.url);
  if (c.url.rfind("sqlite:", 0) != 0 && c.url.rfind("postgresql://", 0) != 0
      && c.url.rfind("postgres://", 0) != 0)
    errors.push_back(
      {"journal.url", "'" + c.url + "' is neither sqlite:PATH nor postgresql://…"});
  s.read("batch_max_events", c.batch_max_events, 1u, 1000000u);
  s.read("batch_max_delay_ms", c.batch_max_delay_ms, 0u, 60000u);
  s.read("queue_capacity", c.queue_capacity, 1u, 100000000u);
  s.read("reconnect_initial_ms", c.reconnect_initial_ms, 1u, 600000u);
  s.read("reconnect_max_ms", c.reconnect_max_ms, 1u, 3600000u);
  if (c.reconnect_max_ms < c.reconnect_initial_ms)
    errors.push_back({"journal.reconnect_max_ms", "is below reconnect_initial_ms"});
  s.finish();
}

void read_ingest(section_reader s, ingest_config& c) {
  auto& l = c.limits;
  s.read("max_body_bytes", c.max_body_bytes, 1024u, 1024u * 1024u * 1024u);
  s.read("max_event_bytes", l.max_event_bytes, size_t{256}, size_t{16} << 20);
  s.read("max_message_bytes", l.max_message_bytes, size_t{16}, size_t{1} << 20);
  s.read("max_string_bytes", l.max_string_bytes, size_t{16}, size_t{1} << 20);
  s.read("max_entities", l.max_entities, size_t{1}, size_t{100000});
  s.read("max_error_codes", l.max_error_codes, size_t{1}, size_t{100000});
  s.read("max_metadata_entries", l.max_metadata_entries, size_t{0}, size_t{100000});
  s.finish();
}

} // namespace

expected<vigil_config> parse_config(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return failure{"", "invalid YAML at line " + std::to_string(e.mark.line + 1) + ": "
                         + e.msg};
  }
  vigil_config config;
  std::vector<failure> errors;
  section_reader top(root, "", errors);
  read_log(top.section("log"), config.log);
  read_runtime(top.section("runtime"), config.runtime);
  read_journal(top.section("journal"), config.journal, errors);
  read_ingest(top.section("ingest"), config.ingest);
  top.finish();
  if (errors.empty())
    return config;
  // Report every problem at once, so one edit fixes them all.
  failure all = errors.front();
  for (size_t i = 1; i < errors.size(); ++i)
    all.what += "; " + errors[i].to_string();
  return all;
}

expected<vigil_config> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot read the configuration file"};
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto parsed = parse_config(buffer.str());
  if (!parsed)
    return failure{path + ": " + parsed.error().where, parsed.error().what};
  return parsed;
}

} // namespace vigil
