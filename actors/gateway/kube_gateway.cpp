#include "actors/gateway/kube_gateway.hpp"

#include <algorithm>
#include <memory>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "runtime/kube/watch_stream.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

using json = nlohmann::json;

constexpr int list_page_size = 500;
constexpr int watch_timeout_seconds = 300;

std::string with_selectors(const kube_watch_spec& spec, std::string query) {
  auto add = [&](const char* key, const std::string& value) {
    if (value.empty())
      return;
    query +=
      (query.empty() ? "" : "&") + std::string(key) + "=" + kube::query_escape(value);
  };
  add("labelSelector", spec.label_selector);
  add("fieldSelector", spec.field_selector);
  return query;
}

// How long to wait before reopening a stream after `failures` failed ones.
caf::timespan rewatch_delay(int failures) {
  if (failures == 0)
    return caf::timespan{0};
  const auto ms = std::min(30000, 100 << std::min(failures, 8));
  return std::chrono::milliseconds{ms};
}

void start_list(kube_gateway_actor* self, std::uint64_t id);
void start_stream(kube_gateway_actor* self, std::uint64_t id);
void end_watch(kube_gateway_actor* self,
               std::map<std::uint64_t, watch_subscription>::iterator it);

void relist(kube_gateway_actor* self, std::uint64_t id) {
  auto it = self->state.watches.find(id);
  if (it == self->state.watches.end())
    return;
  ++self->state.stats->relists;
  it->second.resource_version.clear();
  start_list(self, id);
}

void read_page(kube_gateway_actor* self, std::uint64_t id, std::string continue_token,
               std::size_t page_number);

// Hands a page to the subscriber. The last one goes as a plain message, and
// the stream opens from the list's resourceVersion. Any other goes as a
// request: the next page is read at once, while the subscriber takes this
// one, and waits until it has (one page ahead, never more). A 100,000-Node
// list is 200 pages; a subscriber that spawns an actor per item would
// otherwise get them back to back, and its CAF worker's queue of launched
// actors would grow with the whole list (BENCHMARKS.md "A Node list read as
// fast as it is taken"). Reading ahead lets the API server prepare a page
// while the last one is taken (BENCHMARKS.md "A Node list read one page
// ahead").
void hand_page(kube_gateway_actor* self, std::uint64_t id, listed_page page) {
  auto& w = self->state.watches.at(id);
  if (page.next.empty()) {
    self->send(w.subscriber, std::move(page.event));
    start_stream(self, id);
    return;
  }
  const auto generation = w.generation;
  const auto next_number = page.event.list_page + 1;
  const std::string plural = w.spec.resource.plural;
  w.page_with_subscriber = true;
  self->request(w.subscriber, caf::infinite, std::move(page.event))
    .then(
      [=]() {
        auto it = self->state.watches.find(id);
        if (it == self->state.watches.end() || it->second.generation != generation)
          return;
        auto& sub = it->second;
        sub.page_with_subscriber = false;
        if (!sub.waiting_page)
          return; // not read yet: handed when it is
        auto waiting = std::move(*sub.waiting_page);
        sub.waiting_page.reset();
        hand_page(self, id, std::move(waiting));
      },
      [=](const caf::error& why) {
        // The subscriber is gone: nobody is left to read this watch.
        component_logger("gateway")->info(
          "watch {}: subscriber gone while listing ({}); watch ended", plural,
          caf::to_string(why));
        if (auto it = self->state.watches.find(id); it != self->state.watches.end())
          end_watch(self, it);
      });
  read_page(self, id, std::move(page.next), next_number);
}

// One page of the LIST; a failed one starts the list again, at page 0, after
// a backoff.
void read_page(kube_gateway_actor* self, std::uint64_t id, std::string continue_token,
               std::size_t page_number) {
  auto& sub = self->state.watches.at(id);
  kube::kube_request request;
  request.path = kube::resource_path(sub.spec.resource, sub.spec.ns);
  std::string query = "limit=" + std::to_string(list_page_size);
  if (!continue_token.empty())
    query += "&continue=" + kube::query_escape(continue_token);
  request.query = with_selectors(sub.spec, query);
  const auto generation = sub.generation;
  self
    ->request(caf::actor_cast<kube_gateway_handle>(self), caf::infinite,
              std::move(request))
    .then([=](kube::kube_result& result) {
      auto it = self->state.watches.find(id);
      if (it == self->state.watches.end() || it->second.generation != generation)
        return;
      auto& w = it->second;
      json page =
        result.ok() ? json::parse(result.response().body, nullptr, false) : json();
      if (!result.ok() || !page.is_object() || !page.contains("items")) {
        ++w.failures;
        component_logger("gateway")->warn(
          "list for watch {} failed ({}); retrying", w.spec.resource.plural,
          result.ok() ? std::string("not a List") : result.error().to_string());
        self->delayed_send(self, rewatch_delay(w.failures), rewatch_atom::value, id,
                           w.generation);
        return;
      }
      auto meta = page.value("metadata", json::object());
      std::string next = meta.value("continue", "");
      const std::string version = meta.value("resourceVersion", "");
      if (next.empty())
        w.resource_version = version;
      auto items =
        std::make_shared<const json>(json{{"kind", page.value("kind", "List")},
                                          {"metadata", {{"resourceVersion", version}}},
                                          {"items", std::move(page["items"])}});
      listed_page listed{kube_watch_event{id, "LISTED", std::move(items), version,
                                          page_number, next.empty()},
                         std::move(next)};
      if (w.page_with_subscriber)
        w.waiting_page = std::move(listed);
      else
        hand_page(self, id, std::move(listed));
    });
}

// LIST in pages, each handed to the subscriber (numbered from 0, the last one
// marked); after the last, open the stream from the list's resourceVersion.
// A new list makes whatever an earlier one still had on its way stale.
void start_list(kube_gateway_actor* self, std::uint64_t id) {
  auto& sub = self->state.watches.at(id);
  ++sub.generation;
  sub.page_with_subscriber = false;
  sub.waiting_page.reset();
  read_page(self, id, "", 0);
}

void start_stream(kube_gateway_actor* self, std::uint64_t id) {
  auto& sub = self->state.watches.at(id);
  kube::kube_request request;
  request.path = kube::resource_path(sub.spec.resource, sub.spec.ns);
  request.query = with_selectors(
    sub.spec, "watch=true&allowWatchBookmarks=true&timeoutSeconds="
                + std::to_string(watch_timeout_seconds)
                + "&resourceVersion=" + kube::query_escape(sub.resource_version));
  request.timeout = std::chrono::milliseconds{0};
  const auto generation = ++sub.generation;
  // Lines and the end go to the watch's decoder, one mailbox, so the end
  // never overtakes the stream's last lines.
  auto decoder = sub.decoder;
  sub.stream = self->state.client->watch(
    std::move(request),
    [decoder, id, generation](std::string_view line) {
      caf::anon_send(decoder, watch_line_atom::value, id, generation, std::string(line));
    },
    [decoder, id, generation](std::optional<kube::kube_error> why) {
      caf::anon_send(decoder, watch_end_atom::value, id, generation, std::move(why));
    });
}

// A decoder for a watch's lines, monitored: one that dies is replaced.
watch_decoder_handle spawn_decoder(kube_gateway_actor* self) {
  auto decoder = self->spawn(watch_decoder, caf::actor_cast<kube_gateway_io>(self));
  self->monitor(decoder);
  return decoder;
}

bool watches_anything(const kube_gateway_state& st, const caf::actor_addr& subscriber) {
  return std::any_of(st.watches.begin(), st.watches.end(), [&](const auto& watch) {
    return watch.second.subscriber.address() == subscriber;
  });
}

// Ends a watch: its stream, its decoder, its subscription, and the monitor
// on its subscriber once that was its last watch.
void end_watch(kube_gateway_actor* self,
               std::map<std::uint64_t, watch_subscription>::iterator it) {
  self->state.client->stop_watch(it->second.stream);
  caf::anon_send_exit(it->second.decoder, caf::exit_reason::user_shutdown);
  const auto subscriber = it->second.subscriber;
  self->state.watches.erase(it);
  if (subscriber && !watches_anything(self->state, subscriber.address()))
    self->demonitor(subscriber.address());
}

// A subscriber gone without unwatching (it failed, or quit on its own): its
// watches end with it, stream and decoder included (a subscriber gone while
// a page of its list was with it also fails that request: hand_page's error
// handler, which finds the watch ended already). Left open, each would
// hold a connection to the API server for good, and a subscriber restarted
// in a loop would pile them up. True if it had any.
bool end_watches_of(kube_gateway_actor* self, const caf::actor_addr& gone) {
  auto& watches = self->state.watches;
  bool any = false;
  for (auto it = watches.begin(); it != watches.end();) {
    auto next = std::next(it);
    if (it->second.subscriber.address() == gone) {
      component_logger("gateway")->info("watch {}: its subscriber is gone; ended",
                                        it->second.spec.resource.plural);
      end_watch(self, it);
      any = true;
    }
    it = next;
  }
  return any;
}

// One decoded line of a watch stream: forward it, remember its
// resourceVersion, or relist when the server says our version is gone.
void on_watch_line(kube_gateway_actor* self, watch_subscription& sub, std::uint64_t id,
                   decoded_watch_line& line) {
  if (line.type.empty()) {
    ++self->state.stats->bad_watch_lines;
    component_logger("gateway")->warn(
      "watch {}: not a watch event ({} bytes: {}); resuming", sub.spec.resource.plural,
      line.bytes, line.problem);
    self->state.client->stop_watch(sub.stream);
    ++sub.generation;
    ++sub.failures;
    self->delayed_send(self, rewatch_delay(sub.failures), rewatch_atom::value, id,
                       sub.generation);
    return;
  }
  if (line.type == "ERROR") {
    self->state.client->stop_watch(sub.stream);
    ++sub.generation;
    if (line.status_code == 410) {
      relist(self, id);
      return;
    }
    ++sub.failures;
    self->delayed_send(self, rewatch_delay(sub.failures), rewatch_atom::value, id,
                       sub.generation);
    return;
  }
  sub.failures = 0;
  if (!line.resource_version.empty())
    sub.resource_version = line.resource_version;
  ++self->state.stats->watch_events;
  self->send(sub.subscriber,
             kube_watch_event{id, std::move(line.type), std::move(line.object),
                              sub.resource_version});
}

} // namespace

decoded_watch_line decode_for_gateway(std::string_view line) {
  decoded_watch_line out;
  out.bytes = line.size();
  auto event = kube::decode_watch_line(line);
  if (!event) {
    out.problem = event.error().to_string();
    return out;
  }
  out.type = std::move(event->type);
  out.object = std::make_shared<const json>(std::move(event->object));
  out.resource_version = std::move(event->resource_version);
  out.status_code = event->status_code;
  return out;
}

watch_decoder_handle::behavior_type watch_decoder(watch_decoder_actor* self,
                                                  kube_gateway_io gateway) {
  self->state.gateway = gateway.address();
  self->monitor(gateway);
  self->set_down_handler([=](const caf::down_msg&) { self->quit(); });
  auto to_gateway = [=] { return caf::actor_cast<kube_gateway_io>(self->state.gateway); };
  return {
    [=](watch_line_atom, std::uint64_t id, std::uint64_t generation,
        const std::string& line) {
      if (auto gw = to_gateway())
        self->send(gw, watch_decoded_atom::value, id, generation,
                   decode_for_gateway(line));
    },
    [=](watch_end_atom, std::uint64_t id, std::uint64_t generation,
        std::optional<kube::kube_error>& why) {
      if (auto gw = to_gateway())
        self->send(gw, watch_end_atom::value, id, generation, std::move(why));
    },
  };
}

kube_gateway_io::behavior_type kube_gateway(kube_gateway_actor* self,
                                            std::shared_ptr<kube::kube_client> client,
                                            std::shared_ptr<kube_gateway_stats> stats) {
  self->state.client = std::move(client);
  self->state.stats = stats ? std::move(stats) : std::make_shared<kube_gateway_stats>();
  // No cleanup hook: the state (and with it the client, its I/O thread and
  // every open watch) is destroyed when the actor exits, and each watch's
  // decoder, monitoring the gateway, quits then.
  //
  // A subscriber that is gone ends its watches (end_watches_of). A decoder
  // that died while its watch is open (ended watches' decoders
  // are gone from the state first) is replaced, and the watch resumed from
  // its last resourceVersion: lines it had not passed on are read again.
  self->set_down_handler([=](const caf::down_msg& down) {
    if (end_watches_of(self, down.source))
      return;
    for (auto& [id, sub] : self->state.watches) {
      if (sub.decoder.address() != down.source)
        continue;
      component_logger("gateway")->error("watch {}: its decoder died ({}); resuming",
                                         sub.spec.resource.plural,
                                         caf::to_string(down.reason));
      self->state.client->stop_watch(sub.stream);
      sub.decoder = spawn_decoder(self);
      ++sub.failures;
      self->delayed_send(self, rewatch_delay(sub.failures), rewatch_atom::value, id,
                         ++sub.generation);
      return;
    }
  });
  return {
    [=](kube::kube_request& request) -> caf::result<kube::kube_result> {
      auto& st = self->state;
      ++st.stats->requests;
      ++st.stats->in_flight;
      const auto id = ++st.next_id;
      st.pending.emplace(id, self->make_response_promise());
      auto me = caf::actor_cast<kube_gateway_io>(self);
      st.client->send(std::move(request), [me, id](kube::kube_result result) {
        caf::anon_send(me, done_atom::value, id, std::move(result));
      });
      return st.pending.at(id);
    },
    [=](done_atom, std::uint64_t id, kube::kube_result& result) {
      auto it = self->state.pending.find(id);
      if (it == self->state.pending.end())
        return;
      --self->state.stats->in_flight;
      if (!result.ok())
        ++self->state.stats->failures;
      it->second.deliver(std::move(result));
      self->state.pending.erase(it);
    },
    [=](watch_atom, kube_watch_spec& spec) -> std::uint64_t {
      const auto id = ++self->state.next_id;
      watch_subscription sub;
      sub.spec = std::move(spec);
      sub.subscriber = caf::actor_cast<kube_watch_subscriber>(self->current_sender());
      // Once per subscriber, however many watches it has (the fleet watches
      // again at every leadership and shard change).
      if (sub.subscriber && !watches_anything(self->state, sub.subscriber.address()))
        self->monitor(sub.subscriber);
      sub.decoder = spawn_decoder(self);
      self->state.watches.emplace(id, std::move(sub));
      start_list(self, id);
      return id;
    },
    [=](unwatch_atom, std::uint64_t id) {
      auto it = self->state.watches.find(id);
      if (it != self->state.watches.end())
        end_watch(self, it);
    },
    [=](watch_decoded_atom, std::uint64_t id, std::uint64_t generation,
        decoded_watch_line& line) {
      auto it = self->state.watches.find(id);
      if (it != self->state.watches.end() && it->second.generation == generation)
        on_watch_line(self, it->second, id, line);
    },
    [=](watch_end_atom, std::uint64_t id, std::uint64_t generation,
        std::optional<kube::kube_error>& why) {
      auto it = self->state.watches.find(id);
      if (it == self->state.watches.end() || it->second.generation != generation)
        return;
      auto& sub = it->second;
      if (why && why->gone()) {
        relist(self, id);
        return;
      }
      // A clean end (timeoutSeconds) resumes at once; a failure backs off.
      sub.failures = why ? sub.failures + 1 : 0;
      ++self->state.stats->resumes;
      self->delayed_send(self, rewatch_delay(sub.failures), rewatch_atom::value, id,
                         ++sub.generation);
    },
    [=](rewatch_atom, std::uint64_t id, std::uint64_t generation) {
      auto it = self->state.watches.find(id);
      if (it == self->state.watches.end() || it->second.generation != generation)
        return;
      if (it->second.resource_version.empty())
        start_list(self, id);
      else
        start_stream(self, id);
    },
  };
}

} // namespace vigil
