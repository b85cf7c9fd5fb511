#include "actors/agent/topology/gpu_metadata.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace vigil::agent {

using json = nlohmann::json;

bool operator==(const nvlink_info& a, const nvlink_info& b) {
  return a.link_id == b.link_id && a.remote_pci_address == b.remote_pci_address
         && a.remote_link_id == b.remote_link_id;
}

bool operator==(const gpu_info& a, const gpu_info& b) {
  return a.gpu_id == b.gpu_id && a.pci_address == b.pci_address
         && a.numa_node == b.numa_node && a.uuid == b.uuid
         && a.serial_number == b.serial_number && a.cpu_affinity == b.cpu_affinity
         && a.device_name == b.device_name && a.nvlinks == b.nvlinks;
}

bool operator==(const gpu_metadata& a, const gpu_metadata& b) {
  return a.version == b.version && a.node_name == b.node_name
         && a.driver_version == b.driver_version && a.gpus == b.gpus
         && a.nic_topology == b.nic_topology && a.nvswitches == b.nvswitches
         && a.nvlinks_read == b.nvlinks_read;
}

namespace {

bool all_hex(std::string_view s) {
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c)))
      return false;
  return !s.empty();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Reads key `name` of `object` into `out` when present; `required` makes a
// missing key a failure.
template <class T>
status read_field(const json& object, const char* name, const std::string& where, T& out,
                  bool required) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    if (required)
      return failure{where + name, "is missing"};
    return ok();
  }
  if constexpr (std::is_same_v<T, int>) {
    if (!it->is_number_integer())
      return failure{where + name, "expected an integer"};
    out = it->template get<int>();
  } else {
    if (!it->is_string())
      return failure{where + name, "expected a string"};
    out = it->template get<std::string>();
  }
  return ok();
}

// A PCI address field, normalised in place; `where` names it in the failure.
status normalise_field(std::string& pci, const std::string& where) {
  auto normal = normalise_pci_address(pci);
  if (normal.empty())
    return failure{where, "\"" + pci + "\" is not a PCI address"};
  pci = std::move(normal);
  return ok();
}

status read_nvlinks(const json& j, const std::string& where, gpu_info& gpu) {
  if (!j.is_array())
    return failure{where, "expected an array"};
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!j[i].is_object())
      return failure{at, "expected an object"};
    nvlink_info link;
    const std::string prefix = at + ".";
    for (auto st :
         {read_field(j[i], "link_id", prefix, link.link_id, true),
          read_field(j[i], "remote_pci_address", prefix, link.remote_pci_address, true),
          read_field(j[i], "remote_link_id", prefix, link.remote_link_id, false),
          normalise_field(link.remote_pci_address, prefix + "remote_pci_address")})
      if (!st)
        return st;
    gpu.nvlinks.push_back(std::move(link));
  }
  return ok();
}

status read_gpu(const json& j, const std::string& where, gpu_info& gpu) {
  if (!j.is_object())
    return failure{where, "expected an object"};
  const std::string prefix = where + ".";
  for (auto st : {read_field(j, "gpu_id", prefix, gpu.gpu_id, true),
                  read_field(j, "pci_address", prefix, gpu.pci_address, true),
                  read_field(j, "numa_node", prefix, gpu.numa_node, false),
                  read_field(j, "uuid", prefix, gpu.uuid, false),
                  read_field(j, "serial_number", prefix, gpu.serial_number, false),
                  read_field(j, "cpu_affinity", prefix, gpu.cpu_affinity, false),
                  read_field(j, "device_name", prefix, gpu.device_name, false)})
    if (!st)
      return st;
  if (auto st = normalise_field(gpu.pci_address, prefix + "pci_address"); !st)
    return st;
  if (auto links = j.find("nvlinks"); links != j.end() && !links->is_null())
    return read_nvlinks(*links, prefix + "nvlinks", gpu);
  return ok();
}

status read_nvswitches(const json& j, gpu_metadata& out) {
  if (!j.is_array())
    return failure{"nvswitches", "expected an array of PCI addresses"};
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = "nvswitches[" + std::to_string(i) + "]";
    if (!j[i].is_string())
      return failure{where, "expected a PCI address"};
    auto pci = j[i].get<std::string>();
    if (auto st = normalise_field(pci, where); !st)
      return st;
    out.nvswitches.push_back(std::move(pci));
  }
  return ok();
}

status read_topology(const json& j, gpu_metadata& out) {
  if (!j.is_object())
    return failure{"nic_topology", "expected an object"};
  for (auto& [nic, levels] : j.items()) {
    const std::string where = "nic_topology." + nic;
    if (!levels.is_array())
      return failure{where, "expected an array of topology levels"};
    std::vector<std::string> row;
    for (const auto& level : levels) {
      if (!level.is_string())
        return failure{where, "expected strings such as \"PIX\" or \"SYS\""};
      row.push_back(level.get<std::string>());
    }
    if (row.size() != out.gpus.size())
      return failure{where, "has " + std::to_string(row.size()) + " entries for "
                              + std::to_string(out.gpus.size()) + " GPUs"};
    out.nic_topology.emplace(nic, std::move(row));
  }
  return ok();
}

} // namespace

std::string normalise_pci_address(std::string_view text) {
  // [domain:]bus:device[.function]; nvidia-smi prints an 8-digit domain.
  std::string_view rest = text;
  std::string domain = "0000";
  auto first = rest.find(':');
  auto second = first == std::string_view::npos ? first : rest.find(':', first + 1);
  if (second != std::string_view::npos) {
    auto d = rest.substr(0, first);
    if (!all_hex(d) || d.size() > 8)
      return "";
    d = d.size() > 4 ? d.substr(d.size() - 4) : d;
    domain = std::string(4 - d.size(), '0') + std::string(d);
    rest = rest.substr(first + 1);
  }
  auto colon = rest.find(':');
  if (colon == std::string_view::npos)
    return "";
  auto bus = rest.substr(0, colon);
  auto dev_fn = rest.substr(colon + 1);
  auto dot = dev_fn.find('.');
  auto dev = dev_fn.substr(0, dot);
  auto fn =
    dot == std::string_view::npos ? std::string_view{"0"} : dev_fn.substr(dot + 1);
  if (!all_hex(bus) || bus.size() > 2 || !all_hex(dev) || dev.size() > 2 || fn.size() != 1
      || fn[0] < '0' || fn[0] > '7')
    return "";
  auto pad = [](std::string_view s) { return std::string(2 - s.size(), '0') + lower(s); };
  return lower(domain) + ":" + pad(bus) + ":" + pad(dev) + "." + std::string(fn);
}

expected<gpu_metadata> decode_gpu_metadata(std::string_view text) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded())
    return failure{"", "not valid JSON"};
  if (!doc.is_object())
    return failure{"", "expected a JSON object"};
  gpu_metadata out;
  if (auto st = read_field(doc, "version", "", out.version, false); !st)
    return st.error();
  if (auto st = read_field(doc, "node_name", "", out.node_name, false); !st)
    return st.error();
  if (auto st = read_field(doc, "driver_version", "", out.driver_version, false); !st)
    return st.error();
  auto gpus = doc.find("gpus");
  if (gpus == doc.end())
    return failure{"gpus", "is missing"};
  if (!gpus->is_array())
    return failure{"gpus", "expected an array"};
  for (size_t i = 0; i < gpus->size(); ++i) {
    gpu_info gpu;
    if (auto st = read_gpu((*gpus)[i], "gpus[" + std::to_string(i) + "]", gpu); !st)
      return st.error();
    out.gpus.push_back(std::move(gpu));
  }
  if (auto topo = doc.find("nic_topology"); topo != doc.end() && !topo->is_null())
    if (auto st = read_topology(*topo, out); !st)
      return st.error();
  if (auto switches = doc.find("nvswitches");
      switches != doc.end() && !switches->is_null()) {
    if (auto st = read_nvswitches(*switches, out); !st)
      return st.error();
    out.nvlinks_read = true;
  }
  return out;
}

std::string encode_gpu_metadata(const gpu_metadata& metadata) {
  json gpus = json::array();
  for (const auto& gpu : metadata.gpus) {
    json g = {{"gpu_id", gpu.gpu_id},
              {"pci_address", gpu.pci_address},
              {"numa_node", gpu.numa_node},
              {"uuid", gpu.uuid},
              {"serial_number", gpu.serial_number}};
    if (!gpu.cpu_affinity.empty())
      g["cpu_affinity"] = gpu.cpu_affinity;
    if (!gpu.device_name.empty())
      g["device_name"] = gpu.device_name;
    if (!gpu.nvlinks.empty()) {
      json links = json::array();
      for (const auto& link : gpu.nvlinks)
        links.push_back({{"link_id", link.link_id},
                         {"remote_pci_address", link.remote_pci_address},
                         {"remote_link_id", link.remote_link_id}});
      g["nvlinks"] = std::move(links);
    }
    gpus.push_back(std::move(g));
  }
  json doc = {{"version", metadata.version},
              {"node_name", metadata.node_name},
              {"gpus", std::move(gpus)},
              {"nic_topology", metadata.nic_topology}};
  // Written only when known, so files from before them read back unchanged.
  if (!metadata.driver_version.empty())
    doc["driver_version"] = metadata.driver_version;
  if (metadata.nvlinks_read || !metadata.nvswitches.empty())
    doc["nvswitches"] = metadata.nvswitches;
  return doc.dump(2) + "\n";
}

expected<gpu_metadata> load_gpu_metadata(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot be read (the topology collector writes it; "
                         "see seed 002 §12.2)"};
  std::ostringstream text;
  text << in.rdbuf();
  auto decoded = decode_gpu_metadata(text.str());
  if (!decoded)
    return failure{path, decoded.error().to_string()};
  return decoded;
}

const gpu_info* find_gpu_by_pci(const gpu_metadata& metadata, std::string_view pci) {
  auto wanted = normalise_pci_address(pci);
  for (const auto& gpu : metadata.gpus)
    if (!wanted.empty() && gpu.pci_address == wanted)
      return &gpu;
  return nullptr;
}

agent_gpu_facts gpu_facts_of(const gpu_metadata& metadata) {
  agent_gpu_facts facts;
  if (!metadata.gpus.empty())
    facts.product = metadata.gpus.front().device_name;
  facts.gpu_count = static_cast<int>(metadata.gpus.size());
  if (metadata.nvlinks_read || !metadata.nvswitches.empty())
    facts.nvswitch_count = static_cast<int>(metadata.nvswitches.size());
  facts.driver_version = metadata.driver_version;
  for (const auto& gpu : metadata.gpus)
    if (!gpu.uuid.empty())
      facts.devices.push_back({gpu.gpu_id, gpu.uuid, gpu.pci_address});
  return facts;
}

std::vector<const gpu_info*> gpus_behind_nvswitch(const gpu_metadata& metadata,
                                                  std::string_view switch_pci,
                                                  std::optional<int> switch_link) {
  std::vector<const gpu_info*> out;
  const auto wanted = normalise_pci_address(switch_pci);
  if (wanted.empty())
    return out;
  for (const auto& gpu : metadata.gpus)
    for (const auto& link : gpu.nvlinks)
      if (link.remote_pci_address == wanted
          && (!switch_link || link.remote_link_id == *switch_link)) {
        out.push_back(&gpu);
        break;
      }
  return out;
}

} // namespace vigil::agent
