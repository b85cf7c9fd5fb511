#include "actors/agent/topology/topo_parser.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <utility>

namespace vigil::agent {

namespace {

constexpr std::string_view cpu_affinity_column = "CPU Affinity";
constexpr std::string_view numa_affinity_column = "NUMA Affinity";
constexpr std::string_view gpu_numa_id_column = "GPU NUMA ID";

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back()))
    s.remove_suffix(1);
  return s;
}

/// Drops ANSI escape sequences (nvidia-smi underlines and bolds headers on a tty).
std::string strip_ansi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\x1b') {
      out += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= '@' && text[i] <= '~'))
        ++i;
    } else {
      ++i; // two-character escape
    }
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto eol = text.find('\n');
    lines.push_back(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
  }
  return lines;
}

std::vector<std::string> tokens(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_blank(s[i]))
      ++i;
    size_t start = i;
    while (i < s.size() && !is_blank(s[i]))
      ++i;
    if (i > start)
      out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

/// "GPU0", "NIC12": `prefix` followed by digits only.
bool is_indexed(std::string_view token, std::string_view prefix) {
  if (token.size() <= prefix.size() || token.substr(0, prefix.size()) != prefix)
    return false;
  return std::all_of(token.begin() + static_cast<long>(prefix.size()), token.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

/// A header cell rather than a matrix level ("X", "NV18", "PIX", "SYS").
bool is_column_name(std::string_view token) {
  return is_indexed(token, "GPU") || is_indexed(token, "NIC") || token == "GPU"
         || token == "CPU" || token == "NUMA" || token == "Affinity" || token == "ID"
         || (!token.empty() && std::islower(static_cast<unsigned char>(token[0])));
}

/// A matrix row: starts in column 0 with a device name, then a level.
bool is_matrix_row(std::string_view line) {
  if (line.empty() || is_blank(line.front()))
    return false;
  auto t = tokens(line);
  return t.size() >= 2 && !is_column_name(t[1]);
}

/// Joins the header's words back into column names.
std::vector<std::string> header_columns(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    auto next = [&](size_t k) { return i + k < words.size() ? words[i + k] : ""; };
    if (words[i] == "CPU" && next(1) == "Affinity") {
      out.emplace_back(cpu_affinity_column);
      i += 1;
    } else if (words[i] == "NUMA" && next(1) == "Affinity") {
      out.emplace_back(numa_affinity_column);
      i += 1;
    } else if (words[i] == "GPU" && next(1) == "NUMA" && next(2) == "ID") {
      out.emplace_back(gpu_numa_id_column);
      i += 2;
    } else {
      out.push_back(words[i]);
    }
  }
  return out;
}

bool is_trailing_column(std::string_view name) {
  return name == cpu_affinity_column || name == numa_affinity_column
         || name == gpu_numa_id_column;
}

std::string line_ref(size_t index) {
  return "line " + std::to_string(index + 1);
}

/// "[N/A]" and "N/A" → "".
std::string known(std::string_view value) {
  value = trim(value);
  return value == "[N/A]" || value == "N/A" ? std::string() : std::string(value);
}

int single_number_or(std::string_view text, int fallback) {
  text = trim(text);
  if (text.empty() || text.size() > 6
      || !std::all_of(text.begin(), text.end(),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return fallback;
  return std::stoi(std::string(text));
}

} // namespace

std::string topo_matrix::device_name(const std::string& column) const {
  auto it = nic_names.find(column);
  return it == nic_names.end() ? column : it->second;
}

expected<topo_matrix> parse_topo_matrix(std::string_view text) {
  const std::string clean = strip_ansi(text);
  const auto lines = split_lines(clean);
  size_t i = 0;
  // The header starts at the first line naming GPU0 and runs to the first row.
  while (i < lines.size()) {
    auto t = tokens(lines[i]);
    if (!t.empty() && is_indexed(t[0], "GPU") && !is_matrix_row(lines[i]))
      break;
    ++i;
  }
  if (i == lines.size())
    return failure{"topo -m", "no header line naming GPU0"};
  std::vector<std::string> words;
  for (; i < lines.size() && !is_matrix_row(lines[i]); ++i)
    for (auto& w : tokens(lines[i]))
      words.push_back(std::move(w));
  const auto header = header_columns(words);
  topo_matrix out;
  std::vector<std::string> trailing;
  for (const auto& name : header)
    (is_trailing_column(name) ? trailing : out.columns).push_back(name);
  for (; i < lines.size(); ++i) {
    std::string_view line = trim(lines[i]);
    if (line.rfind("Legend", 0) == 0 || line.rfind("NIC Legend", 0) == 0)
      break;
    if (!is_matrix_row(lines[i]))
      continue;
    auto cells = tokens(line);
    if (!is_indexed(cells[0], "GPU"))
      continue; // NIC rows repeat the GPU rows' NIC columns
    if (cells.size() < 1 + out.columns.size())
      return failure{"topo -m " + line_ref(i),
                     cells[0] + " has " + std::to_string(cells.size() - 1)
                       + " levels for " + std::to_string(out.columns.size())
                       + " columns"};
    topo_gpu_row row;
    row.name = cells[0];
    row.levels.assign(cells.begin() + 1,
                      cells.begin() + 1 + static_cast<long>(out.columns.size()));
    for (size_t k = 0; k < trailing.size() && 1 + out.columns.size() + k < cells.size();
         ++k) {
      const auto& value = cells[1 + out.columns.size() + k];
      if (trailing[k] == cpu_affinity_column)
        row.cpu_affinity = value;
      else if (trailing[k] == numa_affinity_column)
        row.numa_affinity = value;
      else
        row.gpu_numa_id = value;
    }
    out.gpus.push_back(std::move(row));
  }
  for (; i < lines.size(); ++i) {
    auto t = tokens(lines[i]);
    if (t.size() == 2 && t[0].size() > 1 && t[0].back() == ':'
        && is_indexed(t[0].substr(0, t[0].size() - 1), "NIC"))
      out.nic_names[t[0].substr(0, t[0].size() - 1)] = t[1];
  }
  if (out.gpus.empty())
    return failure{"topo -m", "no GPU rows"};
  return out;
}

expected<std::vector<gpu_query_row>> parse_gpu_query_csv(std::string_view text) {
  std::vector<gpu_query_row> out;
  const auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = trim(lines[i]);
    if (line.empty())
      continue;
    std::vector<std::string_view> fields;
    while (true) {
      auto comma = line.find(',');
      fields.push_back(trim(line.substr(0, comma)));
      if (comma == std::string_view::npos)
        break;
      line = line.substr(comma + 1);
    }
    const std::string where = "query-gpu " + line_ref(i);
    if (fields.size() != 4 && fields.size() != 6)
      return failure{where, "has " + std::to_string(fields.size())
                              + " fields, expected index, uuid, pci.bus_id, serial"
                                "[, name, driver_version]"};
    gpu_query_row row;
    row.index = single_number_or(fields[0], -1);
    if (row.index < 0)
      return failure{where, "index \"" + std::string(fields[0]) + "\" is not a number"};
    row.uuid = known(fields[1]);
    row.pci_address = normalise_pci_address(fields[2]);
    if (row.pci_address.empty())
      return failure{where, "pci.bus_id \"" + std::string(fields[2])
                              + "\" is not a PCI address"};
    row.serial = known(fields[3]);
    if (fields.size() == 6) {
      row.name = known(fields[4]);
      row.driver_version = known(fields[5]);
    }
    out.push_back(std::move(row));
  }
  return out;
}

expected<gpu_metadata> build_gpu_metadata(std::string node_name,
                                          const std::vector<gpu_query_row>& gpus,
                                          const topo_matrix& matrix) {
  gpu_metadata out;
  out.node_name = std::move(node_name);
  auto sorted = gpus;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  std::vector<const topo_gpu_row*> rows;
  for (const auto& gpu : sorted) {
    const std::string name = "GPU" + std::to_string(gpu.index);
    auto row = std::find_if(matrix.gpus.begin(), matrix.gpus.end(),
                            [&](const auto& r) { return r.name == name; });
    if (row == matrix.gpus.end())
      return failure{"topo -m", "no row for " + name};
    gpu_info info;
    info.gpu_id = gpu.index;
    info.pci_address = gpu.pci_address;
    info.numa_node = single_number_or(row->numa_affinity, -1);
    info.uuid = gpu.uuid;
    info.serial_number = gpu.serial;
    info.cpu_affinity = row->cpu_affinity;
    info.device_name = gpu.name;
    if (out.driver_version.empty())
      out.driver_version = gpu.driver_version;
    out.gpus.push_back(std::move(info));
    rows.push_back(&*row);
  }
  for (size_t c = 0; c < matrix.columns.size(); ++c) {
    if (is_indexed(matrix.columns[c], "GPU"))
      continue;
    std::vector<std::string> levels;
    for (const auto* row : rows)
      levels.push_back(row->levels[c]);
    out.nic_topology[matrix.device_name(matrix.columns[c])] = std::move(levels);
  }
  return out;
}

std::map<int, std::vector<nvlink_info>> parse_nvlink_remotes(std::string_view text) {
  std::map<int, std::vector<nvlink_info>> out;
  std::optional<int> gpu;
  // Reads "<word><number>:" at the front of `s`, advancing past it.
  auto numbered = [](std::string_view& s, std::string_view word) -> std::optional<int> {
    if (s.substr(0, word.size()) != word)
      return std::nullopt;
    auto rest = trim(s.substr(word.size()));
    auto colon = rest.find(':');
    const int n = single_number_or(rest.substr(0, colon), -1);
    if (colon == std::string_view::npos || n < 0)
      return std::nullopt;
    s = trim(rest.substr(colon + 1));
    return n;
  };
  for (auto raw : split_lines(text)) {
    auto line = trim(raw);
    if (line.substr(0, 4) == "GPU ") {
      gpu = numbered(line, "GPU "); // an unreadable header owns no links
      continue;
    }
    auto link = numbered(line, "Link ");
    if (!gpu || !link || line.substr(0, 13) != "Remote Device")
      continue;
    line = trim(line.substr(13));
    // "<pci>: Link <n>"; the PCI address itself holds colons.
    const auto word = line.rfind("Link");
    auto device = trim(line.substr(0, word == std::string_view::npos ? 0 : word));
    if (word == std::string_view::npos || device.empty() || device.back() != ':')
      continue;
    device.remove_suffix(1);
    nvlink_info info;
    info.link_id = *link;
    info.remote_pci_address = normalise_pci_address(device);
    info.remote_link_id = single_number_or(line.substr(word + 4), -1);
    if (!info.remote_pci_address.empty())
      out[*gpu].push_back(std::move(info));
  }
  return out;
}

void attach_nvlinks(gpu_metadata& metadata,
                    const std::map<int, std::vector<nvlink_info>>& links) {
  std::set<std::string> switches;
  for (auto& gpu : metadata.gpus) {
    auto it = links.find(gpu.gpu_id);
    gpu.nvlinks = it == links.end() ? std::vector<nvlink_info>{} : it->second;
    for (const auto& link : gpu.nvlinks)
      if (find_gpu_by_pci(metadata, link.remote_pci_address) == nullptr)
        switches.insert(link.remote_pci_address);
  }
  metadata.nvswitches.assign(switches.begin(), switches.end());
  metadata.nvlinks_read = true;
}

} // namespace vigil::agent
