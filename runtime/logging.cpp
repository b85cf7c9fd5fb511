#include "runtime/logging.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace vigil {

namespace {

// {"ts":"2026-11-22T10:00:00.123456Z","level":"info","component":"journal","msg":"…"}
class json_line_formatter final : public spdlog::formatter {
public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(since_epoch - secs).count();
    std::time_t t = static_cast<std::time_t>(secs.count());
    std::tm utc{};
    gmtime_r(&t, &utc);
    char ts[80];
    std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ",
                  utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                  utc.tm_min, utc.tm_sec, static_cast<long long>(micros));
    std::string line = R"({"ts":")";
    line += ts;
    line += R"(","level":")";
    const auto level = spdlog::level::to_string_view(msg.level);
    line.append(level.data(), level.size());
    line += R"(","component":")";
    append_json_escaped(line, msg.logger_name.data(), msg.logger_name.size());
    line += R"(","msg":")";
    append_json_escaped(line, msg.payload.data(), msg.payload.size());
    line += "\"}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_line_formatter>();
  }
};

struct logging_state {
  std::mutex mutex; // guards creation of loggers, not logging itself
  log_config config;
  std::shared_ptr<spdlog::sinks::stderr_sink_mt> standard_error =
    std::make_shared<spdlog::sinks::stderr_sink_mt>();
  std::shared_ptr<spdlog::sinks::sink> sink = standard_error;
};

logging_state& state() {
  static logging_state instance;
  return instance;
}

std::unique_ptr<spdlog::formatter> make_formatter(log_format format) {
  if (format == log_format::json)
    return std::make_unique<json_line_formatter>();
  return std::make_unique<spdlog::pattern_formatter>(
    "%Y-%m-%dT%H:%M:%S.%f %^%-5l%$ [%n] %v");
}

} // namespace

void append_json_escaped(std::string& out, const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    const auto c = static_cast<unsigned char>(data[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

void setup_logging(const log_config& config) {
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mutex};
  st.config = config;
  st.standard_error->set_formatter(make_formatter(config.format));
  const auto level = spdlog::level::from_str(config.level);
  spdlog::apply_all(
    [level](const std::shared_ptr<spdlog::logger>& logger) { logger->set_level(level); });
}

void redirect_logs(std::shared_ptr<spdlog::sinks::sink> sink) {
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mutex};
  st.sink = sink ? std::move(sink) : st.standard_error;
  if (st.sink == st.standard_error)
    st.sink->set_formatter(make_formatter(st.config.format));
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& logger) {
    logger->sinks().assign(1, st.sink);
  });
}

std::shared_ptr<spdlog::logger> component_logger(const std::string& component) {
  auto& st = state();
  std::lock_guard<std::mutex> guard{st.mutex};
  if (auto existing = spdlog::get(component))
    return existing;
  auto logger = std::make_shared<spdlog::logger>(component, st.sink);
  logger->set_level(spdlog::level::from_str(st.config.level));
  if (st.sink == st.standard_error)
    st.sink->set_formatter(make_formatter(st.config.format));
  spdlog::register_logger(logger);
  return logger;
}

} // namespace vigil
