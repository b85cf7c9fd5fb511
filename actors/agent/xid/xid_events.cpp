#include "actors/agent/xid/xid_events.hpp"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace vigil::agent {

namespace {

/// decode_limits::max_string_bytes: longer metadata values would be refused at ingest.
constexpr size_t max_metadata_value = 1024;

std::string clip(std::string_view text) {
  return std::string(text.substr(0, max_metadata_value));
}

// "580.159.04" → 580; nullopt when the version is unknown or unreadable.
std::optional<int> driver_major(const std::string& version) {
  int major = 0;
  std::size_t i = 0;
  for (; i < version.size() && i < 4
         && std::isdigit(static_cast<unsigned char>(version[i]));
       ++i)
    major = major * 10 + (version[i] - '0');
  if (i == 0 || (i < version.size() && version[i] != '.'))
    return std::nullopt;
  return major;
}

std::string hex32(std::uint32_t value) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", value);
  return buf;
}

std::uint64_t fnv1a(std::uint64_t hash, std::string_view text) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash ^ 0xff; // field separator, so ("ab","c") and ("a","bc") differ
}

void add_pid_and_name(const xid_record& xid, health_event& event) {
  if (xid.pid)
    event.metadata["pid"] = std::to_string(*xid.pid);
  if (!xid.process_name.empty())
    event.metadata["processName"] = clip(xid.process_name);
}

void add_code_details(const xid_record& xid, health_event& event) {
  auto& md = event.metadata;
  if (xid.graphics) {
    md["gpc"] = std::to_string(xid.graphics->gpc);
    if (xid.graphics->tpc >= 0)
      md["tpc"] = std::to_string(xid.graphics->tpc);
    if (xid.graphics->sm >= 0)
      md["sm"] = std::to_string(xid.graphics->sm);
  }
  if (xid.nvlink_link)
    md["link"] = std::to_string(*xid.nvlink_link);
  if (!xid.nvlink_registers.empty()) {
    std::string regs;
    for (auto r : xid.nvlink_registers)
      regs += (regs.empty() ? "" : " ") + hex32(r);
    md["nvlinkRegisters"] = regs;
  }
  if (xid.nvlink5) {
    const auto& f = *xid.nvlink5;
    if (!f.subcode.empty())
      md["nvlinkSubcode"] = clip(f.subcode);
    if (f.fatal)
      md["nvlinkSeverity"] = *f.fatal ? "Fatal" : "Nonfatal";
    if (f.link)
      md["link"] = std::to_string(*f.link);
    if (f.intr_info)
      md["nvlinkIntrInfo"] = hex32(*f.intr_info);
    if (f.error_status)
      md["nvlinkErrorStatus"] = hex32(*f.error_status);
  }
  if (xid.recovery) {
    if (!xid.recovery->from_label.empty())
      md["recoveryActionFrom"] = clip(xid.recovery->from_label);
    if (!xid.recovery->to_label.empty())
      md["recoveryActionTo"] = clip(xid.recovery->to_label);
  }
  if (xid.caused_by_xid)
    md["causedByXid"] = std::to_string(*xid.caused_by_xid);
  if (!xid.pci_device_id.empty())
    md["pciDeviceId"] = xid.pci_device_id;
  if (!xid.detail_problem.empty())
    md["parseProblem"] = std::string(xid.detail_problem);
}

} // namespace

std::string timestamp_key(const kernel_log_line& line, wall_time at) {
  if (line.kernel_time_us)
    return "k" + std::to_string(*line.kernel_time_us);
  if (!line.syslog_timestamp.empty())
    return std::string(line.syslog_timestamp);
  return format_rfc3339(at);
}

std::string make_event_id(std::string_view node, std::string_view boot_id,
                          std::string_view identity, std::string_view timestamp) {
  // Two FNV-1a 64 passes with different offset bases give 128 bits.
  std::uint64_t a = 14695981039346656037ull;
  std::uint64_t b = 0x84222325cbf29ce4ull;
  for (auto part : {node, boot_id, identity, timestamp}) {
    a = fnv1a(a, part);
    b = fnv1a(b, part);
  }
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

xid_event_builder::xid_event_builder(const xid_catalog& catalog,
                                     xid_event_options options)
  : catalog_(catalog), options_(std::move(options)) {}

void xid_event_builder::learn_gpus(const gpu_metadata& metadata) {
  metadata_ = metadata;
  for (const auto& gpu : metadata.gpus)
    if (!gpu.uuid.empty())
      learn_gpu(gpu.pci_address, gpu.uuid);
}

void xid_event_builder::learn_gpu(std::string_view pci, std::string uuid) {
  auto key = pci_entity_value(pci);
  if (key.empty() || uuid.empty())
    return;
  if (auto old = uuid_by_pci_.find(key); old != uuid_by_pci_.end())
    pci_by_uuid_.erase(old->second);
  pci_by_uuid_[uuid] = key;
  uuid_by_pci_[key] = std::move(uuid);
}

std::string xid_event_builder::uuid_for_pci(std::string_view pci) const {
  auto it = uuid_by_pci_.find(pci_entity_value(pci));
  return it == uuid_by_pci_.end() ? "" : it->second;
}

std::string xid_event_builder::pci_for_uuid(std::string_view uuid) const {
  auto it = pci_by_uuid_.find(std::string(uuid));
  return it == pci_by_uuid_.end() ? "" : it->second;
}

std::optional<health_event> xid_event_builder::build(const parsed_line& line,
                                                     std::string_view raw_line,
                                                     wall_time at) {
  if (const auto* xid = std::get_if<xid_record>(&line.record))
    return xid_event(*xid, line, raw_line, at);
  if (const auto* sxid = std::get_if<sxid_record>(&line.record)) {
    if (sxid->data_only)
      return std::nullopt;
    return sxid_event(*sxid, line, raw_line, at);
  }
  if (const auto* gpu = std::get_if<gpu_at_pci_record>(&line.record)) {
    learn_gpu(gpu->pci, gpu->uuid);
    return std::nullopt;
  }
  if (const auto* reset = std::get_if<reset_occurred_record>(&line.record))
    return reset->success
             ? std::optional<health_event>(reset_event(*reset, line, raw_line, at))
             : std::nullopt; // a failed reset leaves the GPU's XIDs standing
  return std::nullopt;
}

health_event xid_event_builder::base_event(std::string_view check,
                                           std::string_view component,
                                           wall_time at) const {
  health_event event;
  event.agent = std::string(syslog_agent_name);
  event.component_class = std::string(component);
  event.check_name = std::string(check);
  event.node_name = options_.node_name;
  event.generated = at;
  event.strategy = options_.strategy;
  return event;
}

void xid_event_builder::add_gpu_entities(health_event& event,
                                         const std::string& pci) const {
  // seed 000 §1.1: the PCI and, whenever known, the GPU UUID.
  event.entities.push_back({"PCI", pci});
  if (auto uuid = uuid_for_pci(pci); !uuid.empty())
    event.entities.push_back({"GPU_UUID", uuid});
}

health_event xid_event_builder::xid_event(const xid_record& xid, const parsed_line& line,
                                          std::string_view raw_line, wall_time at) {
  const auto* entry = catalog_.find(xid.code);
  auto event =
    base_event(xid.fallen_off_bus ? fallen_off_check_name : xid_check_name, "GPU", at);
  std::string_view identity =
    xid.fallen_off_bus ? std::string_view(xid.detail) : line.line.message;
  event.id = make_event_id(options_.node_name, options_.boot_id, identity,
                           timestamp_key(line.line, at));
  event.error_codes.push_back(std::to_string(xid.code));
  add_gpu_entities(event, xid.pci);
  event.message = entry != nullptr ? entry->mnemonic : "XID " + std::to_string(xid.code);
  auto& md = event.metadata;
  md["line"] = clip(xid.fallen_off_bus ? std::string_view(xid.detail) : raw_line);
  md["mnemonic"] = entry != nullptr ? entry->mnemonic : "UNKNOWN";
  md["immediateBucket"] =
    entry != nullptr ? std::string(to_string(entry->immediate)) : "";
  md["investigatoryBucket"] = entry != nullptr ? clip(entry->investigatory) : "";
  if (entry == nullptr)
    md["catalog"] = "code not in the XID catalog";
  if (line.line.kernel_time_us)
    md["kernelTimeUs"] = std::to_string(*line.line.kernel_time_us);
  add_pid_and_name(xid, event);
  add_code_details(xid, event);
  auto uuid = uuid_for_pci(xid.pci);
  apply_rules(xid, entry, uuid.empty() ? xid.pci : uuid, at, event);
  event.is_fatal = event.action != recommended_action::none;
  return event;
}

void xid_event_builder::apply_rules(const xid_record& xid, const xid_catalog_entry* entry,
                                    const std::string& gpu_key, wall_time at,
                                    health_event& event) {
  auto& md = event.metadata;
  if (xid.code == 63 || xid.code == 64)
    last_remap_event_[gpu_key] = at;
  const xid_bucket bucket = entry != nullptr ? entry->immediate : xid_bucket::none;
  if (auto action = action_for_bucket(bucket)) {
    event.action = *action;
    md["decision"] =
      "bucket " + std::string(bucket == xid_bucket::none ? "(none)" : to_string(bucket));
    return;
  }
  switch (bucket) {
    case xid_bucket::workflow_xid_48: {
      // buckets.csv WORKFLOW_XID_48: solo → RESET_GPU; with 63/64 → DRAIN_AND_RESET.
      // Both are COMPONENT_RESET here: the reset path drains the GPU's pods first.
      auto seen = last_remap_event_.find(gpu_key);
      bool with_remap =
        seen != last_remap_event_.end() && at - seen->second <= options_.companion_window;
      event.action = recommended_action::component_reset;
      md["decision"] = with_remap ? "WORKFLOW_XID_48 with XID 63/64: drain and reset"
                                  : "WORKFLOW_XID_48 solo: reset";
      break;
    }
    case xid_bucket::workflow_xid_45:
      event.action = recommended_action::none;
      if (xid.caused_by_xid) {
        md["decision"] =
          "WORKFLOW_XID_45 not solo: follow XID " + std::to_string(*xid.caused_by_xid);
      } else {
        md["decision"] = "WORKFLOW_XID_45 solo";
        md["recommendation"] = "RESTART_FM: check the NVIDIA fabric manager";
      }
      break;
    case xid_bucket::workflow_nvlink_err: {
      auto decoded = decode_nvlink_registers(xid.nvlink_registers);
      event.action =
        decoded.ignore ? recommended_action::none : recommended_action::contact_support;
      md["decision"] = decoded.ignore ? "WORKFLOW_NVLINK_ERR: ignorable bits only"
                                      : "WORKFLOW_NVLINK_ERR: needs support";
      if (!decoded.findings.empty())
        md["nvlinkFindings"] = clip(decoded.findings);
      break;
    }
    case xid_bucket::workflow_nvlink5_err: {
      const auto& f = xid.nvlink5;
      const auto driver = driver_major(metadata_.driver_version);
      auto decoded =
        f ? catalog_.decode_nvlink5(xid.code, f->intr_info, f->error_status, driver)
          : nvlink5_decision{};
      if (!decoded.bucket && (!f || !f->intr_info)) {
        event.action = recommended_action::contact_support; // unreadable: a person looks
        md["decision"] = "WORKFLOW_NVLINK5_ERR: no intrInfo to decode";
        break;
      }
      if (!decoded.bucket) {
        // No layout of this driver reads the intrInfo: not escalated, as
        // NVSentinel does (another driver's layout would be a guess).
        event.action = recommended_action::none;
        md["decision"] =
          "WORKFLOW_NVLINK5_ERR: no decode row"
          + (driver ? " for driver R" + std::to_string(*driver) : std::string{})
          + ": not escalated";
        break;
      }
      // XID_154_EVAL: the accompanying XID 154 carries the action; alone it is
      // RESTART_APP.
      event.action = *decoded.bucket == nvlink5_bucket::reset_gpu
                       ? recommended_action::component_reset
                       : recommended_action::none;
      md["decision"] = "WORKFLOW_NVLINK5_ERR: " + std::string(to_string(*decoded.bucket));
      md["nvlinkDecodedSubcode"] = decoded.row->subcode;
      md["investigatoryBucket"] = clip(decoded.row->investigatory);
      break;
    }
    case xid_bucket::xid_154: {
      std::optional<recommended_action> action;
      if (xid.recovery)
        action = recovery_action_for(xid.recovery->to_label, xid.recovery->to_code);
      event.action = action.value_or(recommended_action::contact_support);
      md["decision"] = action ? "XID_154: the line's recovery action"
                              : "XID_154: recovery action unreadable";
      break;
    }
    default: event.action = recommended_action::contact_support; break;
  }
}

health_event xid_event_builder::sxid_event(const sxid_record& sxid,
                                           const parsed_line& line,
                                           std::string_view raw_line,
                                           wall_time at) const {
  auto event = base_event(sxid_check_name, "NVSwitch", at);
  event.id = make_event_id(options_.node_name, options_.boot_id, line.line.message,
                           timestamp_key(line.line, at));
  event.error_codes.push_back(std::to_string(sxid.code));
  if (sxid.nvswitch >= 0)
    event.entities.push_back({"NVSWITCH", std::to_string(sxid.nvswitch)});
  event.entities.push_back({"PCI", sxid.pci});
  if (sxid.link)
    event.entities.push_back({"NVLINK", std::to_string(*sxid.link)});
  // The GPUs behind that switch port (all behind the switch when the line
  // names no port), from the NVLinks in gpu_metadata.json: what the fault
  // takes down, and what a drain must cover.
  auto behind = gpus_behind_nvswitch(metadata_, sxid.pci, sxid.link);
  for (const auto* gpu : behind)
    if (!gpu->uuid.empty())
      event.entities.push_back({"GPU_UUID", gpu->uuid});
  if (!behind.empty())
    event.metadata["gpusAttributedBy"] = sxid.link ? "nvlink" : "nvswitch";
  // No SXid catalog is given: fatal → CONTACT_SUPPORT, non-fatal → NONE, as
  // NVSentinel does. Without a severity only "… HALTED" (SOE halted) is fatal.
  bool fatal = sxid.fatal.value_or(sxid.text.find("HALTED") != std::string::npos);
  event.is_fatal = fatal;
  event.action = fatal ? recommended_action::contact_support : recommended_action::none;
  event.message = "SXid " + std::to_string(sxid.code)
                  + (sxid.text.empty() ? "" : ": " + clip(sxid.text));
  event.metadata["line"] = clip(raw_line);
  if (sxid.fatal)
    event.metadata["severity"] = *sxid.fatal ? "Fatal" : "Non-fatal";
  if (line.line.kernel_time_us)
    event.metadata["kernelTimeUs"] = std::to_string(*line.line.kernel_time_us);
  return event;
}

health_event xid_event_builder::reset_event(const reset_occurred_record& reset,
                                            const parsed_line& line,
                                            std::string_view raw_line, wall_time at) {
  // seed 000 §1.2: same agent, component, check and entities as the XID
  // events it clears; the PCI is looked up since the Job only knows the UUID.
  auto event = base_event(xid_check_name, "GPU", at);
  event.id = make_event_id(options_.node_name, options_.boot_id, line.line.message,
                           timestamp_key(line.line, at));
  event.is_healthy = true;
  event.action = recommended_action::none;
  event.message = "GPU reset occurred";
  if (auto pci = pci_for_uuid(reset.uuid); !pci.empty())
    event.entities.push_back({"PCI", pci});
  event.entities.push_back({"GPU_UUID", reset.uuid});
  event.metadata["line"] = clip(raw_line);
  last_remap_event_.erase(reset.uuid);
  return event;
}

} // namespace vigil::agent
