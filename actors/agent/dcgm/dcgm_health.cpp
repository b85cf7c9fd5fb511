#include "actors/agent/dcgm/dcgm_health.hpp"

#include <chrono>
#include <cmath>
#include <set>
#include <sstream>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "actors/agent/xid/xid_catalog.hpp"

namespace vigil::agent {

namespace {

// The dcgm-exporter fields the checks read (its default-counters.csv names).
constexpr std::string_view xid_last = "DCGM_FI_DEV_XID_ERRORS";
constexpr std::string_view xid_count =
  "DCGM_EXP_XID_ERRORS_COUNT"; // per code, in a window
constexpr std::string_view xid_total = "DCGM_EXP_XID_ERRORS_TOTAL"; // per code, a counter
constexpr std::string_view dbe_volatile = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL";
constexpr std::string_view dbe_aggregate = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL";
constexpr std::string_view remap_failure = "DCGM_FI_DEV_ROW_REMAP_FAILURE";
constexpr std::string_view remap_pending = "DCGM_FI_DEV_ROW_REMAP_PENDING";
constexpr std::string_view retired_sbe = "DCGM_FI_DEV_RETIRED_SBE";
constexpr std::string_view retired_dbe = "DCGM_FI_DEV_RETIRED_DBE";
constexpr std::string_view retired_pending = "DCGM_FI_DEV_RETIRED_PENDING";
constexpr std::string_view nvlink_crc_flit =
  "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL";
constexpr std::string_view nvlink_crc_data =
  "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL";
constexpr std::string_view nvlink_replay = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL";
constexpr std::string_view nvlink_recovery =
  "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL";
constexpr std::string_view gpu_temp = "DCGM_FI_DEV_GPU_TEMP";
constexpr std::string_view memory_temp = "DCGM_FI_DEV_MEMORY_TEMP";
constexpr std::string_view power_violation = "DCGM_FI_DEV_POWER_VIOLATION";
constexpr std::string_view thermal_violation = "DCGM_FI_DEV_THERMAL_VIOLATION";

// Every check, in the order its events go out, with what it reads (any one
// field gives it data).
struct check_reads {
  std::string_view check;
  std::vector<std::string_view> fields;
};

const std::vector<check_reads>& fields_by_check() {
  static const std::vector<check_reads> table{
    {dcgm_xid_check, {xid_last, xid_count, xid_total}},
    {dcgm_ecc_check, {dbe_volatile, dbe_aggregate}},
    {dcgm_row_remap_check, {remap_failure, remap_pending}},
    {dcgm_retired_pages_check, {retired_sbe, retired_dbe, retired_pending}},
    {dcgm_nvlink_check,
     {nvlink_crc_flit, nvlink_crc_data, nvlink_replay, nvlink_recovery}},
    {dcgm_thermal_check, {gpu_temp, memory_temp, thermal_violation}},
    {dcgm_power_check, {power_violation}},
  };
  return table;
}

bool is_read_field(std::string_view name) {
  for (const auto& reads : fields_by_check())
    for (auto f : reads.fields)
      if (f == name)
        return true;
  return false;
}

// Cumulative fields may legitimately pass 2^31 (throttle time in µs); the
// others are small gauges.
bool is_counter_field(std::string_view name) {
  return name != xid_last && name != gpu_temp && name != memory_temp
         && name != remap_failure && name != remap_pending && name != xid_count;
}

bool is_xid_count_key(std::string_view key) {
  auto prefixed = [&](std::string_view field) {
    return key.size() > field.size() && key.substr(0, field.size()) == field
           && key[field.size()] == '/';
  };
  return prefixed(xid_count) || prefixed(xid_total);
}

// A GPU's usable values on one page: field → value; the XID counts per code
// as "DCGM_EXP_XID_ERRORS_COUNT/79".
struct gpu_reading {
  std::string pci;
  std::map<std::string, double> values;

  std::optional<double> get(std::string_view field) const {
    auto i = values.find(std::string(field));
    return i == values.end() ? std::nullopt : std::optional<double>(i->second);
  }
};

std::map<std::string, gpu_reading> readings_of(const metric_page& page) {
  std::map<std::string, gpu_reading> out;
  for (const auto& s : page.samples) {
    if (!is_read_field(s.name) || is_dcgm_blank(s.value, is_counter_field(s.name)))
      continue;
    const auto* uuid = s.label("UUID");
    if (uuid == nullptr) // dcgm-exporter --use-old-namespace
      uuid = s.label("uuid");
    if (uuid == nullptr || uuid->empty())
      continue; // a sample vigil cannot tie to a GPU
    auto& r = out[*uuid];
    if (const auto* pci = s.label("pci_bus_id"); pci != nullptr && r.pci.empty())
      r.pci = normalise_pci_address(*pci);
    auto key = s.name;
    if (s.name == xid_count || s.name == xid_total) {
      const auto* code = s.label("xid");
      if (code == nullptr) // the window's "no XID" sample
        continue;
      key += "/" + *code;
    }
    r.values[key] = s.value;
  }
  return out;
}

} // namespace

std::vector<dcgm_blind_check> dcgm_blind_checks(const metric_page& page) {
  std::set<std::string, std::less<>> present;
  for (const auto& [uuid, reading] : readings_of(page))
    for (const auto& [key, value] : reading.values)
      present.insert(key.substr(0, key.find('/'))); // "DCGM_EXP_XID_ERRORS_COUNT/79"
  std::vector<dcgm_blind_check> out;
  for (const auto& [check, fields] : fields_by_check()) {
    bool reads = false;
    for (auto field : fields)
      reads = reads || present.count(field) > 0;
    if (!reads)
      out.push_back({check, fields});
  }
  return out;
}

std::string describe(const std::vector<dcgm_blind_check>& blind) {
  std::string out;
  for (const auto& b : blind) {
    out += (out.empty() ? "" : ", ") + std::string(b.check) + " (";
    for (std::size_t i = 0; i < b.fields.size(); ++i)
      out += (i == 0 ? "" : " or ") + std::string(b.fields[i]);
    out += ")";
  }
  return out;
}

namespace {

// What one check says of one GPU on one page; nullopt: nothing to say (no
// data, or a counter without its baseline).
struct verdict {
  bool unhealthy = false;
  std::string code;
  recommended_action action = recommended_action::none;
  std::string message;
};

verdict healthy_verdict(std::string message) {
  return {false, "", {}, std::move(message)};
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Hysteresis over several values: raised when any reaches its band's raise,
// kept while any stays at or above its clear.
struct banded {
  std::string what;
  double value;
  dcgm_band band;
};

std::optional<verdict> band_verdict(const std::vector<banded>& values, bool was_raised,
                                    const char* code) {
  if (values.empty())
    return std::nullopt;
  std::string over;
  for (const auto& v : values) {
    const bool raised =
      v.value >= v.band.raise || (was_raised && v.value >= v.band.clear);
    if (raised)
      over += (over.empty() ? "" : "; ") + v.what + " " + number(v.value) + " (raise at "
              + number(v.band.raise) + ", clear below " + number(v.band.clear) + ")";
  }
  if (over.empty())
    return healthy_verdict("within thresholds");
  return verdict{true, code, recommended_action::none, over};
}

} // namespace

bool is_dcgm_blank(double value, bool counter) {
  if (!std::isfinite(value) || value < 0)
    return true;
  // dcgm_structs.h: a value at or above the base is blank.
  constexpr double int32_blank = 2147483632.0;          // 0x7ffffff0
  constexpr double int64_blank = 9223372036854775792.0; // 0x7ffffffffffffff0
  return value >= (counter ? int64_blank : int32_blank);
}

// One scrape of one GPU: the counters' increases and rates against the last
// page, and each check's verdict.
struct dcgm_scrape {
  const dcgm_health& health;
  const gpu_reading& now;
  const dcgm_health::gpu_state& before;
  std::optional<double> seconds; ///< since this GPU's last page

  // How much a counter grew since the last page; nullopt without a baseline
  // or when it went down (the exporter restarted).
  std::optional<double> increase(std::string_view field) const {
    auto value = now.get(field);
    auto last = before.counters.find(std::string(field));
    if (!value || last == before.counters.end() || *value < last->second)
      return std::nullopt;
    return *value - last->second;
  }

  // A per-code XID count: how many XIDs of that code to report now. The
  // windowed count (XIDs in the exporter's last few minutes) is reported at
  // the first reading too, a recent fault; the count since the exporter
  // started is a baseline then. After that, growth, a code that first
  // appears having grown from 0.
  std::optional<double> code_count_increase(const std::string& key) const {
    if (!before.scraped)
      return key.rfind(std::string(xid_count) + "/", 0) == 0 ? now.get(key)
                                                             : std::nullopt;
    if (before.counters.count(key) == 0)
      return now.get(key);
    return increase(key);
  }

  std::optional<double> rate(std::initializer_list<std::string_view> fields) const {
    if (!seconds || *seconds <= 0)
      return std::nullopt;
    double sum = 0;
    bool any = false;
    for (auto f : fields)
      if (auto d = increase(f)) {
        sum += *d;
        any = true;
      }
    return any ? std::optional<double>(sum / *seconds) : std::nullopt;
  }

  bool was_raised(std::string_view check) const {
    auto i = before.findings.find(check);
    return i != before.findings.end() && i->second.unhealthy;
  }

  // The XID DCGM saw last (level: cleared when it reads 0, as after a GPU
  // reset restarts DCGM), else an increase of the per-code XID count.
  std::optional<verdict> xid() const {
    std::optional<int> code;
    if (auto last = now.get(xid_last)) {
      if (*last == 0)
        return healthy_verdict("no XID");
      code = static_cast<int>(*last);
    } else {
      for (const auto& [key, value] : now.values)
        if (is_xid_count_key(key))
          if (auto grew = code_count_increase(key); grew && *grew > 0)
            code = std::atoi(key.c_str() + key.find('/') + 1);
      if (!code)
        return std::nullopt;
    }
    verdict v{true, std::to_string(*code), recommended_action::contact_support,
              "DCGM reports XID " + std::to_string(*code)};
    if (health.catalog_ == nullptr)
      return v;
    const auto* entry = health.catalog_->find(*code);
    if (entry == nullptr) {
      v.message += " (not in the XID catalog)";
      return v;
    }
    v.message += " " + entry->mnemonic;
    if (auto action = action_for_bucket(entry->immediate))
      v.action = *action;
    else { // a workflow that needs the kernel-log line: the kernel-log monitor decides
      v.action = recommended_action::none;
      v.message += " (" + std::string(to_string(entry->immediate))
                   + ": decided from the kernel log)";
    }
    return v;
  }

  std::optional<verdict> ecc() const {
    const auto grew = increase(dbe_aggregate);
    if (auto vol = now.get(dbe_volatile); vol && *vol > 0)
      return verdict{true, "DBE", recommended_action::component_reset,
                     number(*vol)
                       + " volatile double-bit ECC errors since the driver loaded"};
    if (grew && *grew > 0)
      return verdict{true, "DBE", recommended_action::component_reset,
                     "aggregate double-bit ECC errors grew by " + number(*grew)};
    if (now.get(dbe_volatile))
      return healthy_verdict("no volatile double-bit ECC errors");
    return std::nullopt;
  }

  std::optional<verdict> row_remap() const {
    const auto failure = now.get(remap_failure);
    const auto pending = now.get(remap_pending);
    if (failure && *failure > 0)
      return verdict{true, "ROW_REMAP_FAILURE", recommended_action::replace_vm,
                     "row remapping failed: the GPU has no spare rows left"};
    if (pending && *pending > 0)
      return verdict{true, "ROW_REMAP_PENDING", recommended_action::component_reset,
                     "a row remap is pending; a GPU reset applies it"};
    if (failure || pending)
      return healthy_verdict("no row remap pending or failed");
    return std::nullopt;
  }

  std::optional<verdict> retired_pages() const {
    const auto sbe = now.get(retired_sbe);
    const auto dbe = now.get(retired_dbe);
    const auto pending = now.get(retired_pending);
    const double total = sbe.value_or(0) + dbe.value_or(0);
    if ((sbe || dbe) && total >= health.thresholds_.retired_pages_replace)
      return verdict{true, "RETIRED_PAGES", recommended_action::replace_vm,
                     number(total) + " retired pages (replace at "
                       + number(health.thresholds_.retired_pages_replace) + ")"};
    if (pending && *pending > 0)
      return verdict{true, "RETIRED_PAGES_PENDING", recommended_action::component_reset,
                     "a page retirement is pending; a GPU reset applies it"};
    if (sbe || dbe || pending)
      return healthy_verdict("retired pages within limits");
    return std::nullopt;
  }

  std::optional<verdict> nvlink() const {
    const auto& t = health.thresholds_;
    std::vector<banded> values;
    if (auto r = rate({nvlink_crc_flit, nvlink_crc_data}))
      values.push_back({"NVLink CRC errors/s", *r, t.nvlink_crc_per_second});
    if (auto r = rate({nvlink_replay}))
      values.push_back({"NVLink replay errors/s", *r, t.nvlink_replay_per_second});
    if (auto r = rate({nvlink_recovery}))
      values.push_back({"NVLink recovery errors/s", *r, t.nvlink_recovery_per_second});
    return band_verdict(values, was_raised(dcgm_nvlink_check), "NVLINK_ERRORS");
  }

  std::optional<verdict> thermal() const {
    const auto& t = health.thresholds_;
    std::vector<banded> values;
    if (auto v = now.get(gpu_temp))
      values.push_back({"GPU temperature °C", *v, t.gpu_temp_c});
    if (auto v = now.get(memory_temp))
      values.push_back({"memory temperature °C", *v, t.memory_temp_c});
    if (auto r = rate({thermal_violation}))
      values.push_back({"share of time thermally throttled",
                        *r * t.violation_counter_seconds, t.thermal_violation_share});
    return band_verdict(values, was_raised(dcgm_thermal_check), "THERMAL");
  }

  std::optional<verdict> power() const {
    std::vector<banded> values;
    if (auto r = rate({power_violation}))
      values.push_back({"share of time power throttled",
                        *r * health.thresholds_.violation_counter_seconds,
                        health.thresholds_.power_violation_share});
    return band_verdict(values, was_raised(dcgm_power_check), "POWER_VIOLATION");
  }

  std::optional<verdict> check(std::string_view name) const {
    if (name == dcgm_xid_check)
      return xid();
    if (name == dcgm_ecc_check)
      return ecc();
    if (name == dcgm_row_remap_check)
      return row_remap();
    if (name == dcgm_retired_pages_check)
      return retired_pages();
    if (name == dcgm_nvlink_check)
      return nvlink();
    if (name == dcgm_thermal_check)
      return thermal();
    return power();
  }
};

dcgm_health::dcgm_health(std::string node, dcgm_thresholds thresholds,
                         const xid_catalog* catalog)
  : node_(std::move(node)), thresholds_(thresholds), catalog_(catalog) {}

health_event dcgm_health::make_event(std::string_view check, bool healthy,
                                     wall_time now) const {
  health_event e;
  e.agent = std::string(dcgm_agent_name);
  e.component_class = "GPU";
  e.check_name = std::string(check);
  e.is_healthy = healthy;
  e.node_name = node_;
  e.generated = now;
  e.metadata["source"] = "dcgm-exporter";
  return e;
}

std::vector<health_event> dcgm_health::observe(const metric_page& page, wall_time now) {
  std::vector<health_event> out;
  if (exporter_down_) {
    exporter_down_ = false;
    auto back = make_event(dcgm_exporter_check, true, now);
    back.component_class = "DCGM";
    back.strategy = processing_strategy::store_only;
    back.message = "dcgm-exporter is readable again";
    out.push_back(std::move(back));
  }
  // A check's first verdict on a GPU is always sent (it clears what an
  // earlier run left); the healthy ones go out as one event per check naming
  // every such GPU.
  std::map<std::string_view, health_event> first_healthy;
  for (const auto& [uuid, reading] : readings_of(page)) {
    auto& gpu = gpus_[uuid];
    if (!reading.pci.empty())
      gpu.pci = reading.pci;
    std::optional<double> seconds;
    if (gpu.scraped)
      seconds = std::chrono::duration<double>(now - *gpu.scraped).count();
    const dcgm_scrape scrape{*this, reading, gpu, seconds};
    std::vector<entity> entities{{"GPU_UUID", uuid}};
    if (!gpu.pci.empty())
      entities.push_back({"PCI", gpu.pci});
    for (const auto& reads : fields_by_check()) {
      const auto check = reads.check;
      auto v = scrape.check(check);
      if (!v)
        continue;
      const auto signature =
        v->unhealthy ? v->code + "/" + std::string(to_string(v->action)) : "";
      auto [last, first] = gpu.findings.try_emplace(check);
      if (!first && last->second.unhealthy == v->unhealthy
          && last->second.signature == signature)
        continue;
      last->second = {v->unhealthy, signature};
      if (first && !v->unhealthy) {
        auto [slot, added] =
          first_healthy.try_emplace(check, make_event(check, true, now));
        if (added)
          slot->second.message = "healthy at the DCGM check's first reading";
        slot->second.entities.push_back({"GPU_UUID", uuid});
        continue;
      }
      auto e = make_event(check, !v->unhealthy, now);
      e.entities = entities;
      e.message = v->message;
      if (v->unhealthy) {
        e.error_codes = {v->code};
        e.action = v->action;
        e.is_fatal = v->action != recommended_action::none;
      }
      out.push_back(std::move(e));
    }
    for (const auto& [field, value] : reading.values)
      gpu.counters[field] = value;
    gpu.scraped = now;
  }
  for (auto& [check, event] : first_healthy)
    out.push_back(std::move(event));
  return out;
}

std::vector<health_event> dcgm_health::exporter_unreachable(const std::string& why,
                                                            wall_time now) {
  if (exporter_down_)
    return {};
  exporter_down_ = true;
  auto e = make_event(dcgm_exporter_check, false, now);
  e.component_class = "DCGM";
  e.strategy = processing_strategy::store_only;
  e.error_codes = {"EXPORTER_UNREACHABLE"};
  e.message = "dcgm-exporter cannot be read: " + why;
  return {std::move(e)};
}

} // namespace vigil::agent
