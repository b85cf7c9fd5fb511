#include "tests/chaos/chaos_uplink.hpp"

#include <chrono>
#include <deque>

#include <caf/all.hpp>
#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/protocol/control_messages.hpp"

namespace vigil::chaos {

namespace {

using json = nlohmann::json;
using flush_atom = caf::atom_constant<caf::atom("upflush")>;

struct pending_batch {
  std::vector<std::string> ids;   ///< events still without a verdict
  std::vector<std::string> lines; ///< their NDJSON lines
  std::function<void(control::ingest_reply)> reply;
};

struct uplink_state {
  std::vector<std::uint16_t> ports;
  std::string token;
  std::size_t target = 0;
  std::deque<pending_batch> queue;
  std::shared_ptr<uplink_record> record;
  CURL* curl = nullptr;
  unsigned failures = 0;
  static inline const char* name = "chaos_uplink";
};

using uplink_actor = caf::stateful_actor<uplink_state>;

std::size_t collect(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// One POST; (HTTP status, body); status 0 when nothing answered.
std::pair<long, std::string> post(uplink_state& st, const std::string& body) {
  const auto url =
    "http://127.0.0.1:" + std::to_string(st.ports[st.target]) + "/v1/events";
  std::string answer;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, ("Authorization: Bearer " + st.token).c_str());
  headers = curl_slist_append(headers, "Content-Type: application/x-ndjson");
  curl_easy_reset(st.curl);
  curl_easy_setopt(st.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(st.curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(st.curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(st.curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(st.curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(st.curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
  curl_easy_setopt(st.curl, CURLOPT_TIMEOUT_MS, 15000L);
  curl_easy_setopt(st.curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(st.curl, CURLOPT_WRITEDATA, &answer);
  long status = 0;
  if (curl_easy_perform(st.curl) == CURLE_OK)
    curl_easy_getinfo(st.curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  return {status, answer};
}

// Sends the front batch once. True when every event in it has a verdict.
bool send_front(uplink_state& st) {
  auto& batch = st.queue.front();
  std::string body;
  for (const auto& line : batch.lines)
    body += line + "\n";
  ++st.record->posts;
  auto [status, answer] = post(st, body);
  auto reply = json::parse(answer, nullptr, false);
  const json* results = reply.is_object() && reply.contains("results")
                            && reply["results"].is_array()
                            && reply["results"].size() == batch.ids.size()
                          ? &reply["results"]
                          : nullptr;
  // Only the control plane's per-event verdicts count: accepted or duplicate
  // (stored), rejected (refused for good). Anything else is sent again.
  if (results == nullptr || (status != 200 && status != 503 && status != 400)) {
    ++st.record->failed_posts;
    return false;
  }
  pending_batch rest{{}, {}, std::move(batch.reply)};
  for (std::size_t i = 0; i < batch.ids.size(); ++i) {
    const auto verdict = (*results)[i].value("status", "");
    if (verdict == "accepted" || verdict == "duplicate") {
      std::lock_guard<std::mutex> guard(st.record->mutex);
      st.record->acknowledged.insert(batch.ids[i]);
    } else if (verdict == "rejected") {
      ++st.record->rejected;
    } else {
      rest.ids.push_back(batch.ids[i]);
      rest.lines.push_back(batch.lines[i]);
      continue;
    }
    --st.record->waiting;
  }
  const bool done = rest.ids.empty();
  batch = std::move(rest);
  if (!done)
    ++st.record->failed_posts;
  return done;
}

caf::behavior uplink(uplink_actor* self, std::vector<std::uint16_t> ports,
                     std::string token, std::shared_ptr<uplink_record> record) {
  self->state.ports = std::move(ports);
  self->state.token = std::move(token);
  self->state.record = std::move(record);
  self->state.curl = curl_easy_init();
  self->attach_functor([self] { curl_easy_cleanup(self->state.curl); });
  return {
    [=](ingest_atom, ingest_request& request) {
      pending_batch batch;
      for (const auto& item : request.items)
        if (item.event) {
          batch.ids.push_back(item.event->id);
          batch.lines.push_back(encode_health_event(*item.event));
        }
      batch.reply = std::move(request.reply);
      self->state.record->waiting += batch.ids.size();
      const bool idle = self->state.queue.empty();
      self->state.queue.push_back(std::move(batch));
      if (idle)
        self->send(self, flush_atom::value);
    },
    [=](flush_atom) {
      auto& st = self->state;
      while (!st.queue.empty()) {
        if (!send_front(st)) {
          // Another replica may lead now; back off up to a second.
          st.target = (st.target + 1) % st.ports.size();
          ++st.failures;
          self->delayed_send(self,
                             std::chrono::milliseconds{std::min(1000u, 50 * st.failures)},
                             flush_atom::value);
          return;
        }
        st.failures = 0;
        if (st.queue.front().reply)
          st.queue.front().reply(control::ingest_reply{200, std::nullopt, "{}"});
        st.queue.pop_front();
      }
    },
  };
}

} // namespace

caf::actor spawn_uplink(caf::actor_system& system, std::vector<std::uint16_t> ports,
                        std::string token, std::shared_ptr<uplink_record> record) {
  return system.spawn<caf::detached>(uplink, std::move(ports), std::move(token),
                                     std::move(record));
}

} // namespace vigil::chaos
