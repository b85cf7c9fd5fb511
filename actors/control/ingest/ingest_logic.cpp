#include "actors/control/ingest/ingest_logic.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include <nlohmann/json.hpp>

namespace vigil::control {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// A per-item error echoes parser output, which can quote a whole string token;
// bounded so that a request of bad lines cannot make a huge reply.
constexpr std::size_t max_error_bytes = 512;
constexpr std::size_t max_token_file_bytes = 65536;
constexpr std::string_view json_blanks = " \t\r\n";

std::string_view trim(std::string_view text, std::string_view blanks = json_blanks) {
  const auto first = text.find_first_not_of(blanks);
  if (first == std::string_view::npos)
    return {};
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string clip(std::string text, std::size_t max_bytes = max_error_bytes) {
  if (text.size() > max_bytes) {
    text.resize(max_bytes);
    text += "...";
  }
  return text;
}

std::string strip_exception_prefix(const std::string& what) {
  // "[json.exception.parse_error.101] parse error at line 1, …" → "parse error at …"
  const auto pos = what.find("] ");
  return pos == std::string::npos ? what : what.substr(pos + 2);
}

std::string dump(const ordered_json& j) {
  // Error texts may quote invalid UTF-8 from the request; replace, never throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

status check_content_type(std::string_view content_type) {
  const auto media = trim(content_type.substr(0, content_type.find(';')));
  const auto name = lowercase(media);
  if (name.empty() || name == "application/json" || name == "application/x-ndjson"
      || name == "application/jsonl")
    return ok();
  return failure{std::string(content_type_where),
                 "unsupported media type \"" + clip(std::string(media), 100)
                   + "\"; send application/x-ndjson or application/json"};
}

// nlohmann's lexer takes a NUL byte for the end of input and would ignore what
// follows it; no JSON text holds one (strings escape it as \u0000).
std::string nul_byte_error(std::size_t offset) {
  return "NUL byte at offset " + std::to_string(offset);
}

// One document of the body before decoding.
struct document {
  std::size_t line = 0;
  std::string_view text;
};

// Stops after max_documents + 1, which is enough to know there are too many.
std::vector<document> split_ndjson(std::string_view body, std::size_t max_documents) {
  std::vector<document> out;
  std::size_t line = 0;
  for (std::size_t pos = 0; pos < body.size() && out.size() <= max_documents;) {
    auto end = body.find('\n', pos);
    if (end == std::string_view::npos)
      end = body.size();
    ++line;
    auto text = body.substr(pos, end - pos);
    if (!text.empty() && text.back() == '\r')
      text.remove_suffix(1);
    if (!trim(text).empty())
      out.push_back({line, text});
    pos = end + 1;
  }
  return out;
}

// Checks a document is JSON without building it (nlohmann's parser is iterative,
// so deep nesting costs no stack); keeps the parse error.
struct json_validator {
  std::string error;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(json::string_t&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    error = strip_exception_prefix(e.what());
    return false;
  }
};

// Where the array element starting at `pos` ends: at the ',' or ']' that follows
// it outside any string or bracket. The text is valid JSON, so strings and
// brackets are all there is to track.
std::size_t element_end(std::string_view text, std::size_t pos) {
  std::size_t depth = 0;
  bool in_string = false;
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (in_string) {
      if (c == '\\')
        ++pos;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '{':
      case '[': ++depth; break;
      case '}':
      case ']':
        if (depth == 0)
          return pos;
        --depth;
        break;
      case ',':
        if (depth == 0)
          return pos;
        break;
      default: break;
    }
  }
  return text.size();
}

// The elements of a JSON array as the text they were sent as, so that decoding
// sees what NDJSON would (duplicate keys, sizes). Stops like split_ndjson.
expected<std::vector<document>> split_array(std::string_view body,
                                            std::size_t max_documents) {
  if (const auto nul = body.find('\0'); nul != std::string_view::npos)
    return failure{std::string(body_where),
                   "not a valid JSON array: " + nul_byte_error(nul)};
  json_validator validator;
  if (!json::sax_parse(body.begin(), body.end(), &validator))
    return failure{std::string(body_where),
                   "not a valid JSON array: " + clip(validator.error)};
  std::vector<document> out;
  std::size_t pos = body.find('[') + 1; // the first non-blank byte
  while (out.size() <= max_documents) {
    pos = std::min(body.find_first_not_of(json_blanks, pos), body.size());
    if (pos == body.size() || body[pos] == ']')
      break;
    const auto end = element_end(body, pos);
    out.push_back({out.size() + 1, trim(body.substr(pos, end - pos))});
    if (end >= body.size() || body[end] != ',')
      break;
    pos = end + 1;
  }
  return out;
}

bool is_json(std::string_view text) {
  json_validator validator;
  return json::sax_parse(text.begin(), text.end(), &validator);
}

// One pretty-printed object (what `curl -d @event.json` sends): its first line
// is not a JSON value on its own, while the whole body is one. NDJSON's first
// line always is.
bool is_single_object(std::string_view body, std::size_t first) {
  if (body[first] != '{')
    return false;
  const auto eol = body.find('\n', first);
  if (eol == std::string_view::npos || body.find('\0') != std::string_view::npos)
    return false;
  return !is_json(body.substr(first, eol - first)) && is_json(body.substr(first));
}

ingest_item decode_document(const document& doc, std::string_view unit,
                            const ingest_limits& limits) {
  ingest_item item;
  item.line = doc.line;
  const auto prefix = std::string(unit) + " " + std::to_string(doc.line) + ": ";
  if (doc.text.size() > limits.max_line_bytes) {
    item.error = prefix + std::to_string(doc.text.size()) + " bytes, over the limit of "
                 + std::to_string(limits.max_line_bytes) + " bytes per "
                 + std::string(unit);
    return item;
  }
  if (const auto nul = doc.text.find('\0'); nul != std::string_view::npos) {
    item.error = prefix + "invalid JSON: " + nul_byte_error(nul);
    return item;
  }
  auto decoded = decode_health_event(doc.text, limits.event);
  if (!decoded) {
    item.error = clip(prefix + decoded.error().to_string());
    return item;
  }
  if (decoded->id.empty())
    decoded->id = derive_event_id(*decoded);
  item.event = std::move(*decoded);
  return item;
}

} // namespace

expected<std::vector<ingest_item>> parse_ingest_body(std::string_view body,
                                                     std::string_view content_type,
                                                     const ingest_limits& limits) {
  if (body.size() > limits.max_body_bytes)
    return failure{std::string(body_size_where),
                   std::to_string(body.size()) + " bytes, over the limit of "
                     + std::to_string(limits.max_body_bytes)};
  if (auto st = check_content_type(content_type); !st)
    return st.error();
  if (body.substr(0, 3) == "\xEF\xBB\xBF")
    body.remove_prefix(3);
  const auto first = body.find_first_not_of(json_blanks);
  const bool is_array = first != std::string_view::npos && body[first] == '[';
  const auto max_documents = limits.max_events_per_request;
  const bool single =
    !is_array && first != std::string_view::npos && is_single_object(body, first);
  auto documents =
    is_array ? split_array(body, max_documents)
    : single ? expected<std::vector<document>>(std::vector<document>{{1, trim(body)}})
             : expected<std::vector<document>>(split_ndjson(body, max_documents));
  if (!documents)
    return documents.error();
  if (documents->empty())
    return failure{std::string(body_where), "no events"};
  if (documents->size() > max_documents)
    return failure{std::string(event_count_where), "over the limit of "
                                                     + std::to_string(max_documents)
                                                     + " events per request"};
  std::vector<ingest_item> items;
  items.reserve(documents->size());
  for (const auto& doc : *documents)
    items.push_back(decode_document(doc, is_array ? "element" : "line", limits));
  return items;
}

int request_failure_status(const failure& request_failure) {
  const std::string_view where = request_failure.where;
  if (where == content_type_where)
    return 415;
  if (where == body_size_where || where == event_count_where)
    return 413;
  return 400;
}

std::string derive_event_id(const health_event& event) {
  health_event without_id = event;
  without_id.id.clear();
  std::uint64_t hash = 14695981039346656037ULL; // FNV-1a 64: offset basis
  for (unsigned char c : encode_health_event(without_id)) {
    hash ^= c;
    hash *= 1099511628211ULL; // FNV-1a 64: prime
  }
  static const char digits[] = "0123456789abcdef";
  std::string out = "ingest-0000000000000000";
  for (std::size_t i = out.size(); hash != 0; hash >>= 4)
    out[--i] = digits[hash & 0xF];
  return out;
}

std::optional<std::string> bearer_token(std::string_view authorization_header) {
  constexpr std::string_view scheme = "bearer";
  const auto value = trim(authorization_header, " \t");
  if (value.size() <= scheme.size() || lowercase(value.substr(0, scheme.size())) != scheme
      || (value[scheme.size()] != ' ' && value[scheme.size()] != '\t'))
    return std::nullopt;
  const auto presented = trim(value.substr(scheme.size()), " \t");
  if (presented.empty())
    return std::nullopt;
  return std::string(presented);
}

bool bearer_token_matches(std::string_view authorization_header,
                          std::string_view expected_token) {
  if (expected_token.empty())
    return true;
  const auto token = bearer_token(authorization_header);
  if (!token)
    return false;
  const std::string_view presented = *token;
  // Every presented byte is compared, whatever matched before, so the time
  // tells nothing about the expected token's content or length.
  unsigned difference = presented.size() == expected_token.size() ? 0 : 1;
  for (std::size_t i = 0; i < presented.size(); ++i)
    difference |= static_cast<unsigned char>(presented[i])
                  ^ static_cast<unsigned char>(expected_token[i % expected_token.size()]);
  return difference == 0;
}

std::string_view to_string(item_status status) {
  switch (status) {
    case item_status::accepted: return "accepted";
    case item_status::duplicate: return "duplicate";
    case item_status::rejected: return "rejected";
    case item_status::unavailable: return "unavailable";
  }
  return "rejected";
}

ingest_reply build_ingest_reply(const std::vector<item_result>& results,
                                int retry_after_seconds) {
  std::array<std::size_t, 4> counts{}; // indexed by item_status
  auto list = ordered_json::array();
  for (const auto& r : results) {
    ++counts.at(static_cast<std::size_t>(r.status));
    ordered_json entry;
    entry["line"] = r.line;
    if (!r.id.empty())
      entry["id"] = r.id;
    entry["status"] = std::string(to_string(r.status));
    if (!r.error.empty())
      entry["error"] = r.error;
    list.push_back(std::move(entry));
  }
  const auto count = [&](item_status s) { return counts[static_cast<std::size_t>(s)]; };
  ordered_json body;
  body["accepted"] = count(item_status::accepted);
  body["duplicates"] = count(item_status::duplicate);
  body["rejected"] = count(item_status::rejected);
  body["unavailable"] = count(item_status::unavailable);
  body["results"] = std::move(list);
  ingest_reply reply;
  if (count(item_status::unavailable) > 0) {
    reply.http_status = 503;
    reply.retry_after_seconds = std::max(1, retry_after_seconds);
  } else if (count(item_status::accepted) + count(item_status::duplicate) == 0) {
    reply.http_status = 400;
  }
  reply.body = dump(body);
  return reply;
}

bool admit_request(const append_pressure& pressure, std::size_t new_appends,
                   const admission_limits& limits) {
  if (new_appends == 0 || pressure.in_flight == 0)
    return true;
  return pressure.in_flight + new_appends <= limits.max_in_flight
         && pressure.oldest_age <= limits.max_oldest_age;
}

void resent_ids::remember(const std::string& id) {
  if (capacity_ == 0)
    return;
  auto [at, fresh] = ids_.insert(id);
  if (!fresh)
    return;
  order_.push_back(&*at);
  if (order_.size() > capacity_) {
    ids_.erase(ids_.find(*order_.front())); // by position: the key is the node's
    order_.pop_front();
  }
}

ingest_reply error_reply(int http_status, std::string_view message) {
  ingest_reply reply;
  reply.http_status = http_status;
  reply.body = dump(ordered_json{{"error", std::string(message)}});
  return reply;
}

ingest_reply request_failure_reply(const failure& request_failure) {
  return error_reply(request_failure_status(request_failure),
                     request_failure.to_string());
}

expected<std::string> load_token_file(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(
    std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file)
    return failure{path, std::string("cannot read the token: ") + std::strerror(errno)};
  std::string text(max_token_file_bytes + 1, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), file.get()));
  if (std::ferror(file.get()) != 0)
    return failure{path, std::string("cannot read the token: ") + std::strerror(errno)};
  if (text.size() > max_token_file_bytes)
    return failure{path, "over " + std::to_string(max_token_file_bytes)
                           + " bytes; not a token"};
  const auto token = trim(text, " \t\r\n\f\v");
  if (token.empty())
    return failure{path, "empty token"};
  if (std::any_of(token.begin(), token.end(),
                  [](unsigned char c) { return c <= ' ' || c == 0x7F; }))
    return failure{path, "the token contains whitespace or control characters"};
  return std::string(token);
}

} // namespace vigil::control
