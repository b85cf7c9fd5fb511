// Logging: one spdlog logger per component, all writing to stderr, as JSON
// lines by default (for log collectors) or as text for people.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "runtime/config.hpp"

namespace vigil {

/// Sets format and level for every component logger, existing and future.
void setup_logging(const log_config& config);

/// The logger of one component ("journal", "ingest", "node"); created on first use.
std::shared_ptr<spdlog::logger> component_logger(const std::string& component);

/// Sends every component logger's lines, existing and future, to `sink`
/// instead of stderr (`vigil demo`'s timeline); nullptr restores stderr.
void redirect_logs(std::shared_ptr<spdlog::sinks::sink> sink);

/// Escapes text for inclusion in a JSON string literal (without the quotes).
void append_json_escaped(std::string& out, const char* data, size_t size);

} // namespace vigil
