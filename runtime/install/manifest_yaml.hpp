// YAML in and out for `vigil install`: the manifests are built as JSON (the
// API's own model) and printed as YAML a person can read and `kubectl apply`
// can take; the embedded YAML assets are read into the same model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace vigil::install {

/// A Kubernetes object in the order its keys are written (apiVersion, kind,
/// metadata, spec …), as kubectl prints them.
using object = nlohmann::ordered_json;

/// An object to print, with the comment printed above it.
struct manifest {
  std::string comment; // lines joined by '\n'; "" for none
  object body;
};

/// A YAML node as JSON, typed as Kubernetes reads YAML: quoted scalars are
/// strings; plain ones are null, booleans (YAML 1.1's yes/no/on/off too),
/// integers, floats, or else strings.
object yaml_to_json(const YAML::Node& node);

/// Parses `text` (one YAML document) into JSON; a std::runtime_error names
/// `what` and the line on bad YAML.
object parse_yaml(std::string_view text, std::string_view what);

/// One object as a YAML document (no `---`), two-space indents, block style;
/// a string is quoted whenever it would read back as anything but that string
/// (true, 8443, 1e3, "", leading spaces …); multi-line strings are literal
/// blocks where they read back byte for byte.
std::string to_yaml(const object& value);

/// A YAML stream: each manifest's comment as `# ` lines, then its document,
/// documents separated by `---`.
std::string to_yaml_stream(const std::vector<manifest>& manifests);

} // namespace vigil::install
