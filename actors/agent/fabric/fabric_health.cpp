#include "actors/agent/fabric/fabric_health.hpp"

#include <cctype>
#include <charconv>

#include "actors/agent/text_input.hpp"

namespace vigil::agent {

namespace {

// nvidia-smi's "no value" spellings.
std::string value_of(std::string_view field) {
  field = trim_space(field);
  if (field == "N/A" || field == "[N/A]" || field == "[Not Supported]"
      || field == "Not Supported" || field == "[Unknown Error]")
    return "";
  return std::string(field);
}

} // namespace

expected<std::vector<fabric_row>> parse_fabric_query(std::string_view csv) {
  std::vector<fabric_row> out;
  std::size_t number = 0;
  while (!csv.empty()) {
    const auto eol = csv.find('\n');
    auto line = trim_space(csv.substr(0, eol));
    csv.remove_prefix(eol == std::string_view::npos ? csv.size() : eol + 1);
    ++number;
    if (line.empty() || line.substr(0, 5) == "index")
      continue;
    std::vector<std::string_view> fields;
    for (std::size_t start = 0;;) {
      const auto comma = line.find(',', start);
      fields.push_back(line.substr(start, comma - start));
      if (comma == std::string_view::npos)
        break;
      start = comma + 1;
    }
    const auto where = "line " + std::to_string(number);
    if (fields.size() != 5)
      return failure{where, "expected 5 fields (" + std::string(fabric_query_fields)
                              + "), found " + std::to_string(fields.size())};
    fabric_row row;
    const auto index = trim_space(fields[0]);
    auto [end, ec] =
      std::from_chars(index.data(), index.data() + index.size(), row.index);
    if (ec != std::errc() || end != index.data() + index.size())
      return failure{where, "index '" + std::string(index) + "' is not a number"};
    row.uuid = value_of(fields[1]);
    row.pci = value_of(fields[2]);
    row.state = value_of(fields[3]);
    row.status = value_of(fields[4]);
    out.push_back(std::move(row));
  }
  return out;
}

fabric_health::fabric_health(std::string node, std::chrono::seconds grace)
  : node_(std::move(node)), grace_(grace) {}

std::vector<health_event> fabric_health::observe(const std::vector<fabric_row>& rows,
                                                 wall_time now) {
  std::string faults;
  bool any_fabric = false;
  bool pending = false;
  for (const auto& r : rows) {
    if (r.state.empty() || r.state == "Not Supported")
      continue;
    any_fabric = true;
    const auto gpu = "GPU " + std::to_string(r.index) + " (" + r.uuid + ")";
    if (r.state == "Completed") {
      if (!r.status.empty() && r.status != "Success")
        faults += (faults.empty() ? "" : "; ") + gpu + ": fabric status " + r.status;
    } else {
      pending = true;
      if (pending_since_ && now - *pending_since_ >= grace_)
        faults += (faults.empty() ? "" : "; ") + gpu + ": fabric registration " + r.state
                  + " for " + std::to_string(grace_.count()) + " s or more";
    }
  }
  if (!any_fabric)
    return {};
  if (!pending)
    pending_since_.reset();
  else if (!pending_since_)
    pending_since_ = now;
  const bool unhealthy = !faults.empty();
  if (!unhealthy && pending)
    return {}; // registering: neither healthy nor (yet) a fault
  if (unhealthy_ == unhealthy && signature_ == faults)
    return {};
  unhealthy_ = unhealthy;
  signature_ = faults;
  health_event e;
  e.agent = std::string(fabric_agent_name);
  e.component_class = "NVLinkFabric";
  e.check_name = std::string(fabric_check_name);
  e.node_name = node_;
  e.generated = now;
  e.is_healthy = !unhealthy;
  if (unhealthy) {
    e.is_fatal = true;
    e.action = recommended_action::restart_bm;
    e.error_codes = {"FABRIC_UNHEALTHY"};
    e.message = "NVLink fabric unhealthy: " + faults
                + ". Restart nvidia-fabricmanager; if the fabric does not complete, "
                  "reboot the node (a GPU reset cannot repair the fabric)";
  } else {
    e.message = "NVLink fabric registration completed on every GPU";
  }
  return {std::move(e)};
}

} // namespace vigil::agent
