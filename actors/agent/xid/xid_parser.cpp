#include "actors/agent/xid/xid_parser.hpp"

#include <cctype>
#include <cstddef>
#include <utility>

#include "actors/agent/topology/gpu_metadata.hpp"

namespace vigil::agent {

namespace {

constexpr auto npos = std::string_view::npos;

/// Lines after the first of the fallen-off message before it is abandoned.
constexpr int fallen_off_max_lines = 4;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_blank(s.front()) || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string_view skip_blanks(std::string_view s) {
  while (!s.empty() && is_blank(s.front()))
    s.remove_prefix(1);
  return s;
}

/// Case-insensitive find; only used on lines already known to be NVIDIA's.
size_t find_ci(std::string_view hay, std::string_view needle, size_t from = 0) {
  if (needle.size() > hay.size())
    return npos;
  for (size_t i = from; i + needle.size() <= hay.size(); ++i) {
    size_t j = 0;
    while (j < needle.size() && lower(hay[i + j]) == lower(needle[j]))
      ++j;
    if (j == needle.size())
      return i;
  }
  return npos;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && find_ci(s.substr(0, prefix.size()), prefix) == 0;
}

/// Reads a decimal number at the start of `s` (at most 9 digits).
std::optional<int> read_int(std::string_view& s) {
  size_t i = 0;
  int value = 0;
  while (i < s.size() && i < 9 && is_digit(s[i]))
    value = value * 10 + (s[i++] - '0');
  if (i == 0)
    return std::nullopt;
  s.remove_prefix(i);
  return value;
}

/// Reads "0x1f", "0X1F" or "1f" (at most 8 hex digits) at the start of `s`.
std::optional<std::uint32_t> read_hex(std::string_view& s) {
  std::string_view t = s;
  if (t.size() >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'))
    t.remove_prefix(2);
  size_t i = 0;
  std::uint32_t value = 0;
  while (i < t.size() && hex_value(t[i]) >= 0) {
    if (i == 8)
      return std::nullopt;
    value = value * 16 + static_cast<std::uint32_t>(hex_value(t[i++]));
  }
  if (i == 0)
    return std::nullopt;
  s = t.substr(i);
  return value;
}

/// The first "<word> <digits>" (or "<word><digits>") in `s`; skips
/// occurrences of `word` not followed by a number ("SM Warp …, SM 0").
std::optional<int> int_after(std::string_view s, std::string_view word) {
  for (size_t at = find_ci(s, word); at != npos; at = find_ci(s, word, at + 1)) {
    std::string_view rest = skip_blanks(s.substr(at + word.size()));
    if (auto value = read_int(rest))
      return value;
  }
  return std::nullopt;
}

/// A "(0x1 0x2, 0x3)" or "[0x1]" list starting at `s[0]`; `closed` tells
/// whether the closing bracket was seen (false for a truncated line).
std::vector<std::uint32_t> read_hex_list(std::string_view s, bool& closed) {
  std::vector<std::uint32_t> values;
  closed = false;
  char close = s.front() == '[' ? ']' : ')';
  s.remove_prefix(1);
  while (true) {
    while (!s.empty() && (is_blank(s.front()) || s.front() == ','))
      s.remove_prefix(1);
    if (s.empty())
      return values;
    if (s.front() == close) {
      closed = true;
      return values;
    }
    auto value = read_hex(s);
    if (!value)
      return values;
    values.push_back(*value);
  }
}

/// "GPU-455d8f70-2051-db6c-0430-ffc457bff834" at the start of `s`, or "".
std::string read_gpu_uuid(std::string_view s) {
  constexpr std::string_view shape = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
  if (s.size() < shape.size())
    return "";
  for (size_t i = 0; i < shape.size(); ++i) {
    bool ok = shape[i] == 'x' ? hex_value(s[i]) >= 0 : s[i] == shape[i];
    if (!ok)
      return "";
  }
  if (s.size() > shape.size() && hex_value(s[shape.size()]) >= 0)
    return "";
  return std::string(s.substr(0, shape.size()));
}

/// "(PCI:0000:03:00)" with `s` just after the '(': the address, or "".
std::string read_parenthesised_pci(std::string_view& s) {
  auto close = s.find(')');
  if (close == npos)
    return "";
  std::string_view inside = trim(s.substr(0, close));
  if (starts_with_ci(inside, "PCI"))
    inside = skip_blanks(inside.substr(3));
  if (!inside.empty() && inside.front() == ':')
    inside = skip_blanks(inside.substr(1));
  s.remove_prefix(close + 1);
  return pci_entity_value(inside);
}

/// "pid=91237, name=nv-hostengine, " at the start of `rest`; consumes them.
void read_pid_and_name(std::string_view& rest, xid_record& out) {
  rest = skip_blanks(rest);
  if (starts_with_ci(rest, "pid=")) {
    rest.remove_prefix(4);
    auto comma = rest.find(',');
    std::string_view value = trim(rest.substr(0, comma));
    if (auto number = read_int(value); number && value.empty())
      out.pid = *number;
    rest = comma == npos ? std::string_view{} : skip_blanks(rest.substr(comma + 1));
  }
  if (starts_with_ci(rest, "name=")) {
    rest.remove_prefix(5);
    auto comma = rest.find(',');
    out.process_name = std::string(trim(rest.substr(0, comma)));
    rest = comma == npos ? std::string_view{} : skip_blanks(rest.substr(comma + 1));
  }
}

void read_xid74(xid_record& out) {
  std::string_view detail = out.detail;
  out.nvlink_link = int_after(detail, "link");
  auto open = detail.rfind('(');
  bool closed = false;
  if (open != npos)
    out.nvlink_registers = read_hex_list(detail.substr(open), closed);
  if (out.nvlink_registers.empty() || !closed)
    out.detail_problem = "xid74_registers";
}

bool equals_ci(std::string_view a, std::string_view b) {
  return a.size() == b.size() && find_ci(a, b) == 0;
}

bool is_severity(std::string_view token, bool& fatal) {
  if (equals_ci(token, "Fatal")) {
    fatal = true;
    return true;
  }
  if (equals_ci(token, "Nonfatal") || equals_ci(token, "Non-fatal")) {
    fatal = false;
    return true;
  }
  return false;
}

/// "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 …)".
void read_nvlink5(xid_record& out) {
  nvlink5_fault fault;
  std::string_view s = out.detail;
  auto numeric_suffix = [&](std::string_view token, std::string_view prefix) {
    std::string_view digits = token.substr(prefix.size());
    if (digits.empty()) {
      s = skip_blanks(s);
      return read_int(s);
    }
    auto value = read_int(digits);
    return digits.empty() ? value : std::nullopt;
  };
  while (true) {
    s = skip_blanks(s);
    if (s.empty() || s.front() == '(' || s.front() == '[')
      break;
    size_t end = 0;
    while (end < s.size() && !is_blank(s[end]) && s[end] != '(' && s[end] != '[')
      ++end;
    std::string_view token = s.substr(0, end);
    s.remove_prefix(end);
    bool fatal = false;
    if (is_severity(token, fatal))
      fault.fatal = fatal;
    else if (token.substr(0, 2) == "XC")
      fault.cross_contain = numeric_suffix(token, "XC");
    else if (token.front() == 'i' && (token.size() == 1 || is_digit(token[1])))
      fault.injected = numeric_suffix(token, "i");
    else if (equals_ci(token, "Link"))
      fault.link = numeric_suffix(token, token);
    else if (fault.subcode.empty() && !fault.fatal && !fault.link)
      fault.subcode = std::string(token);
  }
  bool closed = false;
  if (!s.empty()) {
    auto words = read_hex_list(s, closed);
    if (!words.empty())
      fault.intr_info = words[0];
    if (words.size() > 1)
      fault.error_status = words[1];
    if (words.size() > 2)
      fault.debug_data.assign(words.begin() + 2, words.end());
  }
  if (!fault.intr_info || !closed)
    out.detail_problem = "nvlink5_fields";
  out.nvlink5 = std::move(fault);
}

/// "0x1 (GPU Reset Required)" at the start of `s`.
void read_action(std::string_view s, std::optional<int>& code, std::string& label) {
  s = skip_blanks(s);
  if (auto value = read_hex(s))
    code = static_cast<int>(*value);
  s = skip_blanks(s);
  if (!s.empty() && s.front() == '(') {
    auto close = s.find(')');
    label = std::string(trim(s.substr(1, close == npos ? npos : close - 1)));
  }
}

/// "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".
void read_xid154(xid_record& out) {
  std::string_view s = out.detail;
  recovery_action_change change;
  auto from = find_ci(s, "from ");
  auto to = find_ci(s, " to ", from == npos ? 0 : from);
  if (from != npos)
    read_action(s.substr(from + 5, to == npos ? npos : to - from - 5), change.from_code,
                change.from_label);
  if (to != npos)
    read_action(s.substr(to + 4), change.to_code, change.to_label);
  if (!change.to_code && change.to_label.empty())
    out.detail_problem = "xid154_action";
  out.recovery = std::move(change);
}

void read_code_details(xid_record& out) {
  switch (out.code) {
    case 13:
      if (auto gpc = int_after(out.detail, "GPC")) {
        out.graphics = graphics_location{*gpc, int_after(out.detail, "TPC").value_or(-1),
                                         int_after(out.detail, "SM").value_or(-1)};
      }
      break;
    case 45: {
      auto at = find_ci(out.detail, "caused by previous Xid");
      if (at != npos) {
        // A view, not out.detail.substr(): that temporary would die before read_int.
        std::string_view rest = skip_blanks(std::string_view(out.detail).substr(at + 22));
        out.caused_by_xid = read_int(rest);
      }
      break;
    }
    case 74: read_xid74(out); break;
    case 154: read_xid154(out); break;
    default:
      if (out.code >= 144 && out.code <= 150)
        read_nvlink5(out);
      break;
  }
}

parsed_record malformed(std::string_view kind) {
  return malformed_record{kind};
}

/// "GPU at PCI:0000:03:00: GPU-455d…" with `s` after "GPU at PCI:".
parsed_record parse_gpu_at_pci(std::string_view s) {
  auto uuid_at = s.find("GPU-");
  if (uuid_at == npos)
    return malformed("gpu_at_pci");
  std::string_view address = trim(s.substr(0, uuid_at));
  if (!address.empty() && address.back() == ':')
    address.remove_suffix(1);
  gpu_at_pci_record out{pci_entity_value(trim(address)),
                        read_gpu_uuid(s.substr(uuid_at))};
  if (out.pci.empty() || out.uuid.empty())
    return malformed("gpu_at_pci");
  return out;
}

parsed_record parse_reset_occurred(std::string_view message) {
  auto at = message.find("GPU reset occurred");
  const bool executed = at == npos;
  if (executed)
    at = message.find("GPU reset executed");
  std::string_view rest = skip_blanks(message.substr(at + 18));
  if (!rest.empty() && rest.front() == ':')
    rest = skip_blanks(rest.substr(1));
  auto uuid = read_gpu_uuid(rest);
  if (uuid.empty())
    return malformed("reset_occurred");
  if (!executed)
    return reset_occurred_record{std::move(uuid), true};
  // "…, success: true|false"; without a verdict the line says nothing.
  auto verdict = rest.find("success");
  if (verdict == npos)
    return malformed("reset_occurred");
  auto value = skip_blanks(rest.substr(verdict + 7));
  if (!value.empty() && value.front() == ':')
    value = skip_blanks(value.substr(1));
  if (starts_with_ci(value, "true"))
    return reset_occurred_record{std::move(uuid), true};
  if (starts_with_ci(value, "false"))
    return reset_occurred_record{std::move(uuid), false};
  return malformed("reset_occurred");
}

/// "(PCI ID: 10de:26b5)" anywhere in `s`, or "".
std::string read_pci_device_id(std::string_view s) {
  auto at = find_ci(s, "PCI ID:");
  if (at == npos)
    return "";
  std::string_view rest = skip_blanks(s.substr(at + 7));
  size_t end = 0;
  while (end < rest.size() && (hex_value(rest[end]) >= 0 || rest[end] == ':'))
    ++end;
  return std::string(rest.substr(0, end));
}

} // namespace

std::string pci_entity_value(std::string_view text) {
  text = trim(text);
  if (starts_with_ci(text, "PCI:"))
    text.remove_prefix(4);
  auto normalised = normalise_pci_address(text);
  auto dot = normalised.rfind('.');
  if (dot != std::string::npos)
    normalised.erase(dot);
  return normalised;
}

parsed_record parse_xid_message(std::string_view message) {
  auto at = message.find("Xid");
  if (at == npos)
    at = find_ci(message, "xid");
  if (at == npos)
    return malformed("xid");
  std::string_view s = skip_blanks(message.substr(at + 3));
  if (s.empty() || s.front() != '(')
    return malformed("xid");
  s.remove_prefix(1);
  xid_record out;
  out.pci = read_parenthesised_pci(s);
  s = skip_blanks(s);
  if (out.pci.empty() || s.empty() || s.front() != ':')
    return malformed("xid");
  s = skip_blanks(s.substr(1));
  auto code = read_int(s);
  if (!code || (!s.empty() && !is_blank(s.front()) && s.front() != ','))
    return malformed("xid");
  out.code = *code;
  s = skip_blanks(s);
  if (!s.empty() && s.front() == ',')
    s.remove_prefix(1);
  read_pid_and_name(s, out);
  out.detail = std::string(trim(s));
  read_code_details(out);
  return out;
}

parsed_record parse_sxid_message(std::string_view message) {
  sxid_record out;
  if (auto at = message.find("nvswitch"); at != npos) {
    std::string_view rest = message.substr(at + 8);
    out.nvswitch = read_int(rest).value_or(-1);
  }
  auto at = message.find("SXid");
  if (at == npos)
    return malformed("sxid");
  std::string_view s = skip_blanks(message.substr(at + 4));
  if (s.empty() || s.front() != '(')
    return malformed("sxid");
  s.remove_prefix(1);
  out.pci = read_parenthesised_pci(s);
  s = skip_blanks(s);
  if (out.pci.empty() || s.empty() || s.front() != ':')
    return malformed("sxid");
  s = skip_blanks(s.substr(1));
  auto code = read_int(s);
  if (!code)
    return malformed("sxid");
  out.code = *code;
  auto next_field = [&s] {
    s = skip_blanks(s);
    if (!s.empty() && s.front() == ',')
      s = skip_blanks(s.substr(1));
  };
  next_field();
  size_t end = 0;
  while (end < s.size() && !is_blank(s[end]) && s[end] != ',')
    ++end;
  bool fatal = false;
  if (is_severity(s.substr(0, end), fatal)) {
    out.fatal = fatal;
    s.remove_prefix(end);
    next_field();
  }
  if (starts_with_ci(s, "Link ")) {
    std::string_view rest = skip_blanks(s.substr(5));
    if (auto link = read_int(rest)) {
      out.link = link;
      s = rest;
      next_field();
    }
  }
  out.data_only = !out.fatal && starts_with_ci(s, "Data");
  out.text = std::string(trim(s));
  return out;
}

parsed_line kernel_log_parser::parse(std::string_view line) {
  if (pending_) {
    auto split = split_kernel_log_line(line);
    if (auto done = continue_fallen_off(split, false))
      return std::move(*done);
  }
  // The cheap path: ≥95% of lines are not NVIDIA's and leave here unsplit.
  if (line.find("NVRM") == npos && line.find("SXid") == npos
      && line.find("GPU reset ") == npos)
    return {};
  return parse_nvidia(split_kernel_log_line(line));
}

std::size_t kernel_log_parser::abandoned_fallen_off() const {
  return abandoned_fallen_off_;
}

parsed_line kernel_log_parser::parse_nvidia(kernel_log_line split) {
  std::string_view msg = split.message;
  parsed_line out{split, other_nvidia_line{}};
  auto nvrm = msg.find("NVRM");
  if (nvrm != npos) {
    std::string_view text = msg.substr(nvrm + 4);
    if (auto xid = text.find("Xid"); xid != npos)
      out.record = parse_xid_message(text);
    else if (auto gpu_at = text.find("GPU at PCI:"); gpu_at != npos)
      out.record = parse_gpu_at_pci(text.substr(gpu_at + 11));
    else if (auto gpu = text.find("The NVIDIA GPU"); gpu != npos)
      return start_fallen_off(split, nvrm + 4 + gpu + 14);
    return out;
  }
  if (msg.find("SXid") != npos)
    out.record = parse_sxid_message(msg);
  else if (msg.find("GPU reset occurred") != npos
           || msg.find("GPU reset executed") != npos)
    out.record = parse_reset_occurred(msg);
  return out;
}

parsed_line kernel_log_parser::start_fallen_off(const kernel_log_line& split, size_t at) {
  if (pending_ && pending_->saw_installed)
    ++abandoned_fallen_off_;
  pending_.reset();
  std::string_view rest = skip_blanks(split.message.substr(at));
  size_t end = 0;
  while (end < rest.size() && !is_blank(rest[end]) && rest[end] != ',')
    ++end;
  std::string pci = pci_entity_value(rest.substr(0, end));
  if (pci.empty())
    return {split, malformed("fallen_off_bus")};
  pending_fallen_off state{std::move(pci),
                           read_pci_device_id(rest),
                           std::string(split.message),
                           split.kernel_time_us,
                           0,
                           false};
  state.saw_installed =
    rest.find("installed in this system") != npos && rest.find("not supported") == npos;
  pending_ = std::move(state);
  if (rest.find("fallen off the bus") != npos)
    return std::move(*continue_fallen_off(split, true));
  return {split, other_nvidia_line{}};
}

std::optional<parsed_line>
kernel_log_parser::continue_fallen_off(const kernel_log_line& split, bool same_line) {
  std::string_view msg = split.message;
  // An Xid line ("…79, GPU has fallen off the bus.") interrupts the message.
  const bool xid_line = !same_line && msg.find("Xid") != npos;
  if (!same_line && (xid_line || msg.find("fallen off the bus") == npos)) {
    bool installed = !xid_line && msg.find("installed in this system") != npos
                     && msg.find("not supported") == npos;
    if (installed && !pending_->saw_installed) {
      pending_->saw_installed = true;
      if (pending_->pci_device_id.empty())
        pending_->pci_device_id = read_pci_device_id(msg);
      pending_->text.append(" ").append(msg);
      ++pending_->lines_seen;
      return parsed_line{split, other_nvidia_line{}};
    }
    if (++pending_->lines_seen > fallen_off_max_lines || msg.find("NVRM") != npos) {
      if (pending_->saw_installed)
        ++abandoned_fallen_off_;
      pending_.reset();
    }
    return std::nullopt;
  }
  xid_record record;
  record.pci = std::move(pending_->pci);
  record.code = 79;
  record.fallen_off_bus = true;
  record.pci_device_id = std::move(pending_->pci_device_id);
  record.detail = std::move(pending_->text);
  if (!same_line)
    record.detail.append(" ").append(msg);
  parsed_line out{split, std::move(record)};
  if (pending_->kernel_time_us)
    out.line.kernel_time_us = pending_->kernel_time_us;
  pending_.reset();
  return out;
}

} // namespace vigil::agent
