// Turns kernel log lines into typed NVIDIA driver records (Xid, SXid, GPU fallen
// off the bus, PCI → UUID announcements, GPU reset notices). Pure, no regex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actors/agent/xid/kernel_log_line.hpp"

namespace vigil::agent {

/// "PCI:0000:03:00", "00000000:03:00.0", "3:0" … → "0000:03:00": the form
/// seed 000 §2 uses for the PCI entity (4-digit domain, lower case, no
/// function). "" when `text` is not a PCI address.
std::string pci_entity_value(std::string_view text);

/// XID 13: "(GPC 0, TPC 1, SM 0)"; a part the line lacks stays -1.
struct graphics_location {
  int gpc = -1;
  int tpc = -1;
  int sm = -1;
};

/// XIDs 144–150 (NVLink5): "<subcode> Fatal|Nonfatal XC<n> i<n> Link <n>
/// (<intrInfo> <errorStatus> <debug>…)". Catalog "WORKFLOW_NVLINK5_ERR".
struct nvlink5_fault {
  std::string subcode; ///< "NETIR_LINK_EVT"; empty when absent
  std::optional<bool> fatal;
  std::optional<int> cross_contain; ///< XC<n>
  std::optional<int> injected;      ///< i<n>
  std::optional<int> link;
  std::optional<std::uint32_t> intr_info;
  std::optional<std::uint32_t> error_status;
  std::vector<std::uint32_t> debug_data;
};

/// XID 154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".
struct recovery_action_change {
  std::optional<int> from_code;
  std::string from_label;
  std::optional<int> to_code;
  std::string to_label; ///< "GPU Reset Required", "Drain P2P", …; may be empty
};

/// One `NVRM: Xid (PCI:…): <code>, …` line, or the three-line fallen-off-the-bus
/// message reported as XID 79.
struct xid_record {
  std::string pci; ///< pci_entity_value form, "0000:03:00"
  int code = 0;
  std::optional<long long> pid; ///< absent for "pid='<unknown>'" and when missing
  std::string process_name;     ///< as written, "<unknown>" included; may be empty
  std::string detail;           ///< the text after code, pid and name
  bool fallen_off_bus = false;  ///< from the "has fallen off the bus" message
  std::string pci_device_id;    ///< "10de:2330" from that message, when given
  std::optional<graphics_location> graphics;      ///< XID 13
  std::vector<std::uint32_t> nvlink_registers;    ///< XID 74, up to seven
  std::optional<int> nvlink_link;                 ///< XID 74 "link 14"
  std::optional<nvlink5_fault> nvlink5;           ///< XIDs 144–150
  std::optional<recovery_action_change> recovery; ///< XID 154
  std::optional<int> caused_by_xid;               ///< XID 45 "caused by previous Xid N"
  /// Non-empty when the code-specific part could not be read (the record is
  /// still usable): "xid74_registers", "nvlink5_fields", "xid154_action".
  std::string_view detail_problem;
};

/// `nvidia-nvswitch<N>: SXid (PCI:…): <code>[, Fatal|Non-fatal][, Link <n>] <text>`.
struct sxid_record {
  int nvswitch = -1;
  std::string pci; ///< pci_entity_value form
  int code = 0;
  std::optional<bool> fatal; ///< absent for ", Data {…}", "SOE HALTED", …
  std::optional<int> link;
  std::string text;
  bool data_only = false; ///< ", Data {…}": payload of the SXid line before it
};

/// `NVRM: GPU at PCI:0000:03:00: GPU-455d8f70-…`: teaches PCI → UUID.
struct gpu_at_pci_record {
  std::string pci; ///< pci_entity_value form
  std::string uuid;
};

/// `GPU reset occurred: GPU-…`, written by the GPU reset Job (seed 000 §1.2).
/// `GPU reset occurred: <UUID>`, or the janitor's `GPU reset executed:
/// <UUID>, success: true|false` (NVSentinel's form): only a successful reset
/// clears the GPU's XIDs.
struct reset_occurred_record {
  std::string uuid;
  bool success = true;
};

/// An NVIDIA line the parser could not read; `kind` is a fixed name
/// ("xid", "sxid", "gpu_at_pci", "reset_occurred", "fallen_off_bus").
struct malformed_record {
  std::string_view kind;
};

/// An NVIDIA line that carries nothing for the monitor ("NVRM: loading …",
/// a fallen-off continuation line).
struct other_nvidia_line {};

using parsed_record =
  std::variant<std::monostate, other_nvidia_line, xid_record, sxid_record,
               gpu_at_pci_record, reset_occurred_record, malformed_record>;

/// What one line gave. `record` holds std::monostate for a line that is not
/// NVIDIA's (the cheap path: no allocation, `line` left empty). `line` points
/// into the input.
struct parsed_line {
  kernel_log_line line;
  parsed_record record;

  bool is_nvidia() const { return record.index() != 0; }
};

/// Parses kernel log lines one at a time. Holds the only cross-line state:
/// the fallen-off-the-bus message spans three lines, so its first line is
/// remembered until the last arrives or a few lines pass.
class kernel_log_parser {
public:
  /// `line` without its trailing newline. The fallen-off message is returned
  /// on its last line, with the first line's kernel timestamp and the three
  /// messages joined in `xid_record::detail`.
  parsed_line parse(std::string_view line);

  /// Fallen-off messages cut short after their "installed in this system has"
  /// line: the caller counts them as malformed "fallen_off_bus".
  std::size_t abandoned_fallen_off() const;

private:
  parsed_line parse_nvidia(kernel_log_line split);
  std::optional<parsed_line> continue_fallen_off(const kernel_log_line& split,
                                                 bool same_line);
  parsed_line start_fallen_off(const kernel_log_line& split, size_t at);

  struct pending_fallen_off {
    std::string pci;
    std::string pci_device_id;
    std::string text; ///< the messages so far, joined by blanks
    std::optional<std::int64_t> kernel_time_us;
    int lines_seen = 0;
    bool saw_installed = false;
  };
  std::optional<pending_fallen_off> pending_;
  std::size_t abandoned_fallen_off_ = 0;
};

/// Parses one message (prefix already stripped) as an Xid line. Exposed for tests.
parsed_record parse_xid_message(std::string_view message);
/// Parses one message as an SXid line. Exposed for tests.
parsed_record parse_sxid_message(std::string_view message);

} // namespace vigil::agent
