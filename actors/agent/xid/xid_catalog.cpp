#include "actors/agent/xid/xid_catalog.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace vigil::agent {

namespace {

struct bucket_name {
  xid_bucket bucket;
  std::string_view name;
};

constexpr std::array<bucket_name, 15> bucket_names = {{
  {xid_bucket::none, ""},
  {xid_bucket::contact_support, "CONTACT_SUPPORT"},
  {xid_bucket::restart_app, "RESTART_APP"},
  {xid_bucket::ignore, "IGNORE"},
  {xid_bucket::reset_gpu, "RESET_GPU"},
  {xid_bucket::restart_bm, "RESTART_BM"},
  {xid_bucket::restart_vm, "RESTART_VM"},
  {xid_bucket::update_swfw, "UPDATE_SWFW"},
  {xid_bucket::check_mechanicals, "CHECK_MECHANICALS"},
  {xid_bucket::check_uvm, "CHECK_UVM"},
  {xid_bucket::xid_154, "XID_154"},
  {xid_bucket::workflow_xid_45, "WORKFLOW_XID_45"},
  {xid_bucket::workflow_xid_48, "WORKFLOW_XID_48"},
  {xid_bucket::workflow_nvlink_err, "WORKFLOW_NVLINK_ERR"},
  {xid_bucket::workflow_nvlink5_err, "WORKFLOW_NVLINK5_ERR"},
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// RFC 4180 fields: commas separate, double quotes quote, "" is a quote.
std::optional<std::vector<std::string>> split_csv_row(std::string_view row) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < row.size(); ++i) {
    char c = row[i];
    if (quoted) {
      if (c == '"' && i + 1 < row.size() && row[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted)
    return std::nullopt;
  for (auto& field : fields)
    field = std::string(trim(field));
  return fields;
}

std::optional<int> parse_int(std::string_view s) {
  if (s.empty() || s.size() > 6)
    return std::nullopt;
  int value = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::optional<std::uint32_t> parse_hex_word(std::string_view s) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || s.size() > 10)
    return std::nullopt;
  std::uint32_t value = 0;
  for (char c : s.substr(2)) {
    int digit = std::isxdigit(static_cast<unsigned char>(c))
                  ? (std::isdigit(static_cast<unsigned char>(c))
                       ? c - '0'
                       : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10)
                  : -1;
    if (digit < 0)
      return std::nullopt;
    value = value * 16 + static_cast<std::uint32_t>(digit);
  }
  return value;
}

/// Calls `row(fields, where)` for each data row after the header; comment
/// ('#') and blank lines are skipped. Failures name "file:line".
template <class F>
status for_each_row(std::string_view text, std::string_view file, std::string_view header,
                    F&& row) {
  size_t line_no = 0;
  bool seen_header = false;
  while (!text.empty()) {
    auto eol = text.find('\n');
    std::string_view line = trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    ++line_no;
    if (line.empty() || line.front() == '#')
      continue;
    std::string where = std::string(file) + ":" + std::to_string(line_no);
    if (!seen_header) {
      if (line != header)
        return failure{where, "expected the header \"" + std::string(header) + "\""};
      seen_header = true;
      continue;
    }
    auto fields = split_csv_row(line);
    if (!fields)
      return failure{where, "unterminated quote"};
    if (auto st = row(*fields, where); !st)
      return st;
  }
  if (!seen_header)
    return failure{std::string(file), "no header line"};
  return ok();
}

status wrong_field_count(const std::string& where, size_t got, size_t want) {
  return failure{where, "has " + std::to_string(got) + " fields, expected "
                          + std::to_string(want)};
}

std::optional<nvlink5_bucket> parse_nvlink5_bucket(std::string_view text) {
  if (text == "IGNORE")
    return nvlink5_bucket::ignore;
  if (text == "RESET_GPU")
    return nvlink5_bucket::reset_gpu;
  if (text == "XID_154_EVAL")
    return nvlink5_bucket::xid_154_eval;
  return std::nullopt;
}

status parse_nvlink5_row(const std::vector<std::string>& f, const std::string& where,
                         std::vector<nvlink5_decode_row>& out) {
  if (f.size() != 8)
    return wrong_field_count(where, f.size(), 8);
  nvlink5_decode_row row;
  auto xid = parse_int(f[0]);
  if (!xid || *xid < 144 || *xid > 150)
    return failure{where, "xid \"" + f[0] + "\" is not one of 144-150"};
  row.xid = *xid;
  row.subcode = f[1];
  for (int v = 0; v < 2; ++v) {
    const std::string& text = f[2 + v];
    if (text.empty())
      continue;
    auto pattern = parse_bit_pattern(text);
    if (!pattern)
      return failure{where, "intrinfo_v" + std::to_string(v + 1) + " \"" + text
                              + "\" is not 32 characters of 0, 1 and -"};
    (v == 0 ? row.intr_info_v1 : row.intr_info_v2) = *pattern;
  }
  if (!row.intr_info_v1 && !row.intr_info_v2)
    return failure{where, "needs intrinfo_v1 or intrinfo_v2"};
  std::string_view statuses = f[4];
  while (!statuses.empty()) {
    auto slash = statuses.find('/');
    auto word = parse_hex_word(trim(statuses.substr(0, slash)));
    if (!word)
      return failure{where,
                     "error_status \"" + f[4] + "\" is not 0x-hex words separated by /"};
    row.error_status.push_back(*word);
    statuses =
      slash == std::string_view::npos ? std::string_view{} : statuses.substr(slash + 1);
  }
  auto bucket = parse_nvlink5_bucket(f[5]);
  if (!bucket)
    return failure{where,
                   "bucket \"" + f[5] + "\" is not IGNORE, RESET_GPU or XID_154_EVAL"};
  row.bucket = *bucket;
  row.investigatory = f[6];
  row.severity = f[7];
  out.push_back(std::move(row));
  return ok();
}

expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return failure{path, "cannot be opened"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool row_has_status(const nvlink5_decode_row& row, std::uint32_t status) {
  return std::find(row.error_status.begin(), row.error_status.end(), status)
         != row.error_status.end();
}

/// The most severe row of `rows`, or an empty decision.
nvlink5_decision worst(const std::vector<const nvlink5_decode_row*>& rows) {
  nvlink5_decision out;
  for (const auto* row : rows)
    if (!out.bucket || row->bucket > *out.bucket) {
      out.bucket = row->bucket;
      out.row = row;
    }
  return out;
}

} // namespace

std::string_view to_string(xid_bucket bucket) {
  for (const auto& entry : bucket_names)
    if (entry.bucket == bucket)
      return entry.name;
  return "";
}

std::optional<xid_bucket> parse_xid_bucket(std::string_view text) {
  for (const auto& entry : bucket_names)
    if (entry.name == text)
      return entry.bucket;
  return std::nullopt;
}

std::optional<recommended_action> action_for_bucket(xid_bucket bucket) {
  switch (bucket) {
    case xid_bucket::restart_app:
    case xid_bucket::ignore: return recommended_action::none;
    case xid_bucket::reset_gpu: return recommended_action::component_reset;
    case xid_bucket::restart_bm: return recommended_action::restart_bm;
    case xid_bucket::restart_vm: return recommended_action::restart_vm;
    case xid_bucket::none:
    case xid_bucket::contact_support:
    case xid_bucket::update_swfw:
    case xid_bucket::check_mechanicals:
    // CHECK_UVM needs to know whether UVM/vGPU is in use, which the agent
    // cannot tell from the line: a person decides.
    case xid_bucket::check_uvm: return recommended_action::contact_support;
    case xid_bucket::xid_154:
    case xid_bucket::workflow_xid_45:
    case xid_bucket::workflow_xid_48:
    case xid_bucket::workflow_nvlink_err:
    case xid_bucket::workflow_nvlink5_err: return std::nullopt;
  }
  return recommended_action::contact_support;
}

std::optional<bit_pattern> parse_bit_pattern(std::string_view text) {
  if (text.size() != 32)
    return std::nullopt;
  bit_pattern out;
  for (size_t i = 0; i < 32; ++i) {
    std::uint32_t bit = std::uint32_t{1} << (31 - i);
    if (text[i] == '1') {
      out.mask |= bit;
      out.value |= bit;
    } else if (text[i] == '0') {
      out.mask |= bit;
    } else if (text[i] != '-') {
      return std::nullopt;
    }
  }
  return out;
}

std::string_view to_string(nvlink5_bucket bucket) {
  switch (bucket) {
    case nvlink5_bucket::ignore: return "IGNORE";
    case nvlink5_bucket::xid_154_eval: return "XID_154_EVAL";
    case nvlink5_bucket::reset_gpu: return "RESET_GPU";
  }
  return "";
}

nvlink_register_decision decode_nvlink_registers(const std::vector<std::uint32_t>& regs) {
  // buckets.csv, WORKFLOW_NVLINK_ERR: what each set bit of registers 1, 3, 4
  // and 5 means; bits it does not list are "report a bug".
  auto classify = [](size_t reg, int bit) -> std::string_view {
    auto in = [bit](std::initializer_list<int> bits) {
      return std::find(bits.begin(), bits.end(), bit) != bits.end();
    };
    switch (reg) {
      case 0:
        if (in({0, 23, 30}))
          return "ignore";
        if (in({1, 20}))
          return "sympathetic";
        if (in({4, 5}))
          return "ecc_parity";
        if (in({8, 9, 12, 16, 17, 24, 28}))
          return "check_link_mechanicals";
        if (in({21, 22}))
          return "marginal_si";
        if (in({27, 29}))
          return "report_if_repeated";
        break;
      case 2:
        if (in({0, 1, 2, 6}))
          return "ecc_parity";
        if (in({16, 19}))
          return "field_diag_if_repeated";
        if (in({17, 18}))
          return "report_if_repeated";
        break;
      case 3:
        if (in({16, 17, 18}))
          return "sympathetic";
        break;
      case 4:
        if (in({20, 23, 26, 29}))
          return "ecc_threshold";
        if (in({18, 19, 21, 22, 24, 25, 27, 28}))
          return "ecc_parity";
        break;
      default: break;
    }
    return "unexpected";
  };
  nvlink_register_decision out;
  bool any = false;
  bool all_ignorable = true;
  for (size_t reg = 0; reg < regs.size(); ++reg) {
    for (int bit = 0; bit < 32; ++bit) {
      if ((regs[reg] & (std::uint32_t{1} << bit)) == 0)
        continue;
      any = true;
      auto what = classify(reg, bit);
      all_ignorable = all_ignorable && (what == "ignore" || what == "ecc_threshold");
      if (!out.findings.empty())
        out.findings += ' ';
      out.findings += "r" + std::to_string(reg + 1) + ".b" + std::to_string(bit) + "="
                      + std::string(what);
    }
  }
  out.ignore = any && all_ignorable;
  return out;
}

std::optional<recommended_action> recovery_action_for(std::string_view label,
                                                      std::optional<int> code) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (auto& c : out)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string l = lower(label);
  if (l == "none")
    return recommended_action::none;
  if (l == "gpu reset required" || l == "drain p2p" || l == "drain and reset")
    return recommended_action::component_reset;
  if (l == "node reboot required")
    return recommended_action::restart_bm;
  if (!code)
    return std::nullopt;
  switch (*code) {
    case 0: return recommended_action::none;
    case 1:
    case 3:
    case 4: return recommended_action::component_reset;
    case 2: return recommended_action::restart_bm;
    default: return std::nullopt;
  }
}

expected<xid_catalog> xid_catalog::parse(std::string_view xid_csv,
                                         std::string_view nvlink5_csv,
                                         std::string_view xid_file,
                                         std::string_view nvlink5_file) {
  xid_catalog out;
  auto xids = for_each_row(
    xid_csv, xid_file, "code,mnemonic,immediate_bucket,investigatory_bucket",
    [&out](const std::vector<std::string>& f, const std::string& where) -> status {
      if (f.size() != 4)
        return wrong_field_count(where, f.size(), 4);
      auto code = parse_int(f[0]);
      if (!code || *code == 0)
        return failure{where, "code \"" + f[0] + "\" is not a positive number"};
      if (f[1].empty())
        return failure{where, "mnemonic is empty"};
      auto bucket = parse_xid_bucket(f[2]);
      if (!bucket)
        return failure{where, "immediate_bucket \"" + f[2]
                                + "\" is unknown; add it to the table in XID_CATALOG.md"};
      xid_catalog_entry entry{*code, f[1], *bucket, f[3]};
      if (!out.entries_.emplace(*code, std::move(entry)).second)
        return failure{where, "code " + f[0] + " appears twice"};
      return ok();
    });
  if (!xids)
    return xids.error();
  auto decode =
    for_each_row(nvlink5_csv, nvlink5_file,
                 "xid,subcode,intrinfo_v1,intrinfo_v2,error_status,bucket,investigatory_"
                 "bucket,severity",
                 [&out](const std::vector<std::string>& f, const std::string& where) {
                   return parse_nvlink5_row(f, where, out.nvlink5_);
                 });
  if (!decode)
    return decode.error();
  return out;
}

std::string xid_catalog::default_dir() {
  const char* dir = std::getenv("VIGIL_CONFIG_DIR");
  return dir != nullptr && *dir != '\0' ? dir : VIGIL_DEFAULT_CONFIG_DIR;
}

expected<xid_catalog> xid_catalog::load(const std::string& dir) {
  const std::string xid_path = dir + "/xid_catalog.csv";
  const std::string nvlink5_path = dir + "/nvlink5_decode.csv";
  auto xids = read_file(xid_path);
  if (!xids)
    return xids.error();
  auto decode = read_file(nvlink5_path);
  if (!decode)
    return decode.error();
  return parse(*xids, *decode, xid_path, nvlink5_path);
}

const xid_catalog_entry* xid_catalog::find(int code) const {
  auto it = entries_.find(code);
  return it == entries_.end() ? nullptr : &it->second;
}

nvlink5_decision xid_catalog::decode_nvlink5(int xid,
                                             std::optional<std::uint32_t> intr_info,
                                             std::optional<std::uint32_t> error_status,
                                             std::optional<int> driver_major) const {
  if (!intr_info)
    return {};
  // R575 changed the IntrInfo layout; a known driver reads only its own.
  const bool v1 = !driver_major || *driver_major < 575;
  const bool v2 = !driver_major || *driver_major >= 575;
  std::vector<const nvlink5_decode_row*> candidates;
  for (const auto& row : nvlink5_)
    if (row.xid == xid
        && ((v1 && row.intr_info_v1 && row.intr_info_v1->matches(*intr_info))
            || (v2 && row.intr_info_v2 && row.intr_info_v2->matches(*intr_info))))
      candidates.push_back(&row);
  std::vector<const nvlink5_decode_row*> exact;
  for (const auto* row : candidates)
    if (row->error_status.empty()
        || (error_status && row_has_status(*row, *error_status)))
      exact.push_back(row);
  if (!exact.empty() || !error_status)
    return worst(exact);
  // Several status bits and no row for the combination: every bit needs its own row.
  std::vector<const nvlink5_decode_row*> per_bit;
  for (int bit = 0; bit < 32; ++bit) {
    std::uint32_t mask = std::uint32_t{1} << bit;
    if ((*error_status & mask) == 0)
      continue;
    if (mask == *error_status)
      return {};
    std::vector<const nvlink5_decode_row*> rows;
    for (const auto* row : candidates)
      if (row_has_status(*row, mask))
        rows.push_back(row);
    if (rows.empty())
      return {};
    per_bit.push_back(worst(rows).row);
  }
  return worst(per_bit);
}

} // namespace vigil::agent
