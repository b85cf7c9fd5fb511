// NVIDIA's XID catalog as vigil reads it (config/xid_catalog.csv and
// config/nvlink5_decode.csv) and the one table from catalog buckets to actions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"

namespace vigil::agent {

/// The catalog's "immediate action" resolution buckets (buckets.csv).
enum class xid_bucket {
  none, ///< the catalog gives no bucket (codes 162–172 in this version)
  contact_support,
  restart_app,
  ignore,
  reset_gpu,
  restart_bm,
  restart_vm,
  update_swfw,
  check_mechanicals,
  check_uvm,
  xid_154,
  workflow_xid_45,
  workflow_xid_48,
  workflow_nvlink_err,
  workflow_nvlink5_err,
};

/// "RESET_GPU" for reset_gpu; "" for none.
std::string_view to_string(xid_bucket bucket);
/// The catalog's spelling; "" gives none; nullopt for a name vigil does not know.
std::optional<xid_bucket> parse_xid_bucket(std::string_view text);

/// The documented bucket → RecommendedAction table (config/XID_CATALOG.md):
/// RESTART_APP, IGNORE → NONE; RESET_GPU → COMPONENT_RESET; RESTART_BM →
/// RESTART_BM; RESTART_VM → RESTART_VM; CONTACT_SUPPORT, UPDATE_SWFW,
/// CHECK_MECHANICALS, CHECK_UVM and no bucket → CONTACT_SUPPORT. nullopt for
/// XID_154 and WORKFLOW_*: those are rules that need the line or the GPU's
/// history, applied by xid_event_builder.
std::optional<recommended_action> action_for_bucket(xid_bucket bucket);

/// One row of config/xid_catalog.csv.
struct xid_catalog_entry {
  int code = 0;
  std::string mnemonic;
  xid_bucket immediate = xid_bucket::none;
  std::string investigatory; ///< free text: "CONTACT_SUPPORT", "WORKFLOW_XID_13", …
};

/// A 32-bit IntrInfo pattern, most significant bit first, '-' = don't care.
struct bit_pattern {
  std::uint32_t mask = 0;  ///< bits that must match
  std::uint32_t value = 0; ///< their values

  bool matches(std::uint32_t word) const { return (word & mask) == value; }
};

/// Parses "------000000----------0000100001"; nullopt unless 32 of [01-].
std::optional<bit_pattern> parse_bit_pattern(std::string_view text);

/// The resolution the NVLink5 decode table gives (nvlink5-decode.csv).
enum class nvlink5_bucket { ignore, xid_154_eval, reset_gpu };

std::string_view to_string(nvlink5_bucket bucket);

/// One row of config/nvlink5_decode.csv.
struct nvlink5_decode_row {
  int xid = 0;
  std::string subcode;                     ///< "NETIR_LINK_EVT/NETIR_LINK_DOWN"
  std::optional<bit_pattern> intr_info_v1; ///< before R575
  std::optional<bit_pattern> intr_info_v2; ///< R575 and later
  std::vector<std::uint32_t> error_status; ///< empty: any value
  nvlink5_bucket bucket = nvlink5_bucket::ignore;
  std::string investigatory;
  std::string severity; ///< "Fatal", "Non-fatal", "Link Fatal", … as the catalog has it
};

/// What the decode table says about one NVLink5 XID; `bucket` is nullopt when
/// no row covers the (intrInfo, errorStatus) pair: the caller contacts support.
struct nvlink5_decision {
  std::optional<nvlink5_bucket> bucket;
  const nvlink5_decode_row* row = nullptr; ///< the row that decided, if any
};

/// XID 74's seven registers read by the catalog's WORKFLOW_NVLINK_ERR rules.
struct nvlink_register_decision {
  bool ignore = false;  ///< every set bit is one the catalog says to ignore
  std::string findings; ///< "r1.b4=ecc_parity r5.b20=ecc_threshold", for metadata
};

/// WORKFLOW_NVLINK_ERR (buckets.csv): ignorable only when bits are set and
/// all are first-register bits 0, 23, 30 or fifth-register bits 20, 23, 26,
/// 29 (ECC threshold, "continue operation"); anything else needs support.
nvlink_register_decision decode_nvlink_registers(const std::vector<std::uint32_t>& regs);

/// XID 154's new recovery action: by label ("GPU Reset Required"), else by
/// NVML's number (0 None, 1 GPU Reset, 2 Node Reboot, 3 Drain P2P, 4 Drain and
/// Reset). None → NONE; GPU Reset, Drain P2P, Drain and Reset →
/// COMPONENT_RESET (the reset path drains the GPU's pods first); Node Reboot →
/// RESTART_BM. nullopt when neither label nor number is known.
std::optional<recommended_action> recovery_action_for(std::string_view label,
                                                      std::optional<int> code);

/// The loaded catalog. Immutable once loaded; cheap to share by const reference.
class xid_catalog {
public:
  /// Parses both files' text; `xid_file` and `nvlink5_file` name them in
  /// failures, which read "xid_catalog.csv:12: <problem>".
  static expected<xid_catalog>
  parse(std::string_view xid_csv, std::string_view nvlink5_csv,
        std::string_view xid_file = "xid_catalog.csv",
        std::string_view nvlink5_file = "nvlink5_decode.csv");

  /// Reads `dir`/xid_catalog.csv and `dir`/nvlink5_decode.csv.
  static expected<xid_catalog> load(const std::string& dir);

  /// Where the catalog's files are: $VIGIL_CONFIG_DIR, else the config/
  /// directory compiled in (the container image sets the variable).
  static std::string default_dir();

  /// The entry for `code`, or nullptr for a code the catalog does not list.
  const xid_catalog_entry* find(int code) const;

  std::size_t size() const { return entries_.size(); }

  /// Decodes an NVLink5 XID (144–150). Rows match on the IntrInfo layout of
  /// the driver that wrote the line (`driver_major` below 575: the V1 layout,
  /// 575 and later: V2; unknown: either) and on errorStatus; several rows →
  /// the most severe bucket. An errorStatus with several bits and no exact
  /// row is read bit by bit (each bit must have a row). No intrInfo or no row
  /// → no bucket.
  nvlink5_decision decode_nvlink5(int xid, std::optional<std::uint32_t> intr_info,
                                  std::optional<std::uint32_t> error_status,
                                  std::optional<int> driver_major = std::nullopt) const;

  const std::vector<nvlink5_decode_row>& nvlink5_rows() const { return nvlink5_; }

private:
  std::map<int, xid_catalog_entry> entries_;
  std::vector<nvlink5_decode_row> nvlink5_;
};

} // namespace vigil::agent
