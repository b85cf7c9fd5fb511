#include "actors/agent/fabric/nvlink_status.hpp"

#include <algorithm>
#include <charconv>

#include "actors/agent/text_input.hpp"

namespace vigil::agent {

namespace {

bool read_int(std::string_view text, int& out) {
  text = trim_space(text);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

} // namespace

expected<std::vector<gpu_nvlinks>> parse_nvlink_status(std::string_view text) {
  std::vector<gpu_nvlinks> out;
  std::size_t number = 0;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const auto line = trim_space(text.substr(0, eol));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++number;
    const auto where = "line " + std::to_string(number);
    const auto colon = line.find(':');
    if (line.rfind("GPU ", 0) == 0 && colon != std::string_view::npos) {
      gpu_nvlinks gpu;
      if (!read_int(line.substr(4, colon - 4), gpu.index))
        continue; // "GPU 00000000:18:00.0 …" and other prose
      if (auto at = line.find("(UUID: "); at != std::string_view::npos) {
        auto uuid = line.substr(at + 7);
        gpu.uuid = std::string(trim_space(uuid.substr(0, uuid.find(')'))));
      }
      out.push_back(std::move(gpu));
      continue;
    }
    if (line.rfind("Link ", 0) == 0 && colon != std::string_view::npos) {
      if (out.empty())
        return failure{where, "a Link line before any GPU line"};
      int link = 0;
      if (!read_int(line.substr(5, colon - 5), link))
        return failure{where, "link number '" + std::string(line.substr(5, colon - 5))
                                + "' is not a number"};
      const auto value = trim_space(line.substr(colon + 1));
      auto& gpu = out.back();
      (value.find("inactive") != std::string_view::npos ? gpu.inactive : gpu.active)
        .push_back(link);
      continue;
    }
    if (!out.empty() && line.find("all links are inActive") != std::string_view::npos)
      out.back().none_active = true;
  }
  return out;
}

std::vector<std::string> nvlink_shortfalls(const std::vector<gpu_nvlinks>& gpus) {
  std::size_t most = 0;
  for (const auto& g : gpus)
    most = std::max(most, g.active.size());
  std::vector<std::string> out;
  if (most == 0)
    return out;
  for (const auto& g : gpus) {
    if (g.active.size() >= most)
      continue;
    std::string line = "GPU " + std::to_string(g.index) + " (" + g.uuid + "): ";
    if (g.inactive.empty()) {
      line += g.none_active ? "every NVLink inactive" : "NVLinks missing";
    } else {
      line += g.inactive.size() == 1 ? "NVLink " : "NVLinks ";
      for (std::size_t i = 0; i < g.inactive.size(); ++i)
        line += (i == 0 ? "" : ", ") + std::to_string(g.inactive[i]);
      line += " inactive";
    }
    line +=
      " (" + std::to_string(g.active.size()) + " of " + std::to_string(most) + " active)";
    out.push_back(std::move(line));
  }
  return out;
}

} // namespace vigil::agent
