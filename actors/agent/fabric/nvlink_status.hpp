// NVLink link status per GPU (`nvidia-smi nvlink --status`): on an NVLink
// baseboard every GPU's links train alike, so a GPU with fewer active links
// than its peers lost some (seed 003's NVLinkHealthy: the fabric status). The
// fabric can still register; the job on that GPU runs at a fraction of its
// bandwidth. Plain code; fabric_monitor runs the command.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::agent {

/// One GPU's links as nvidia-smi prints them: "Link 3: 26.562 GB/s" is
/// active, "Link 4: <inactive>" is not. `none_active` is nvidia-smi's "all
/// links are inActive" note in place of the list.
struct gpu_nvlinks {
  int index = 0;
  std::string uuid;
  std::vector<int> active;
  std::vector<int> inactive;
  bool none_active = false;
};

/// Reads `nvidia-smi nvlink --status`: a "GPU <n>: <name> (UUID: <uuid>)"
/// line opens each GPU, its "Link <k>: …" lines follow; other lines are
/// skipped. A Link line before any GPU line, or a link number that is not a
/// number, fails naming its line.
expected<std::vector<gpu_nvlinks>> parse_nvlink_status(std::string_view text);

/// The GPUs with fewer active links than the most any GPU of the node has,
/// one line each: "GPU 3 (GPU-…): NVLinks 4, 5 inactive (16 of 18 active)".
/// Nothing when no GPU has an active link (no NVLinks, or a fabric that is
/// down, which the fabric state reports).
std::vector<std::string> nvlink_shortfalls(const std::vector<gpu_nvlinks>& gpus);

} // namespace vigil::agent
