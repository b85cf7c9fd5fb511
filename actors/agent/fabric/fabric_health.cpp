#include "actors/agent/fabric/fabric_health.hpp"

#include <algorithm>
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

bool is_true(const std::string& value) {
  return value == "True" || value == "true" || value == "Yes";
}

} // namespace

bool has_fabric(const std::vector<fabric_row>& rows,
                const fabric_manager_state& manager) {
  return manager.nvswitches > 0
         || std::any_of(rows.begin(), rows.end(), [](const fabric_row& r) {
              return !r.state.empty() && r.state != "Not Supported";
            });
}

std::string fabric_health_problem(const fabric_row& row, bool& recovering) {
  recovering = is_true(row.route_recovery) || is_true(row.access_timeout_recovery);
  if (recovering)
    return ""; // degraded while the driver reroutes: judged once it is done
  std::string problem;
  auto add = [&](const std::string& what) {
    problem += (problem.empty() ? "" : ", ") + what;
  };
  if (is_true(row.route_unhealthy))
    add("route unhealthy");
  if (!row.bandwidth.empty() && row.bandwidth != "Full")
    add("bandwidth " + row.bandwidth);
  if (!row.incorrect_configuration.empty() && row.incorrect_configuration != "None")
    add("incorrect configuration " + row.incorrect_configuration);
  if (problem.empty() && !row.summary.empty() && row.summary != "Healthy")
    add("health " + row.summary); // Unhealthy or Limited Capacity, for another reason
  return problem;
}

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
    if (fields.size() != 5 && fields.size() != 12)
      return failure{where, "expected 5 fields (" + std::string(fabric_query_fields)
                              + ") or 12 (with the fabric's health), found "
                              + std::to_string(fields.size())};
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
    if (fields.size() == 12) {
      row.summary = value_of(fields[5]);
      row.bandwidth = value_of(fields[6]);
      row.route_recovery = value_of(fields[7]);
      row.route_unhealthy = value_of(fields[8]);
      row.access_timeout_recovery = value_of(fields[9]);
      row.incorrect_configuration = value_of(fields[10]);
      row.partition_assigned = value_of(fields[11]);
    }
    out.push_back(std::move(row));
  }
  return out;
}

fabric_health::fabric_health(std::string node, std::chrono::seconds grace)
  : node_(std::move(node)), grace_(grace) {}

std::vector<health_event>
fabric_health::observe(const std::vector<fabric_row>& rows, wall_time now,
                       const fabric_manager_state& manager,
                       const std::vector<std::string>& nvlink_faults) {
  if (!has_fabric(rows, manager))
    return {};
  std::string faults;
  if (manager.missing())
    faults = "nvidia-fabricmanager is not running (" + std::to_string(manager.nvswitches)
             + " NVSwitches on this node need it)";
  bool pending = false;
  for (const auto& r : rows) {
    if (r.state.empty() || r.state == "Not Supported")
      continue;
    const auto gpu = "GPU " + std::to_string(r.index) + " (" + r.uuid + ")";
    auto fault = [&](const std::string& what) {
      faults += (faults.empty() ? "" : "; ") + gpu + ": " + what;
    };
    if (r.state == "Completed") {
      bool recovering = false;
      if (!r.status.empty() && r.status != "Success") {
        fault("fabric status " + r.status);
      } else if (auto problem = fabric_health_problem(r, recovering); !problem.empty()) {
        fault("fabric " + problem);
      } else if (recovering) {
        pending = true;
        if (pending_since_ && now - *pending_since_ >= grace_)
          fault("fabric recovery in progress for " + std::to_string(grace_.count())
                + " s or more");
      }
    } else {
      pending = true;
      if (pending_since_ && now - *pending_since_ >= grace_)
        fault("fabric registration " + r.state + " for " + std::to_string(grace_.count())
              + " s or more");
    }
  }
  for (const auto& link : nvlink_faults)
    faults += (faults.empty() ? "" : "; ") + link;
  if (!pending)
    pending_since_.reset();
  else if (!pending_since_)
    pending_since_ = now;
  const bool unhealthy = !faults.empty();
  if (!unhealthy && pending)
    return {}; // registering or recovering: neither healthy nor (yet) a fault
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
    e.message = "NVLink fabric registration completed on every GPU, and its health good "
                "where the driver reports it";
  }
  return {std::move(e)};
}

} // namespace vigil::agent
