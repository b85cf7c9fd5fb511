#include "runtime/sim/kube/kube_client_in_process.hpp"

#include <map>

#include "runtime/sim/kube/kube_rest.hpp"

namespace vigil::kube {

namespace {

struct open_watch {
  watch_target target;
  std::uint64_t resource_version = 0;
  kube_client::line_handler on_line;
  kube_client::end_handler on_end;
};

} // namespace

struct in_process_api::state {
  explicit state(std::size_t watch_window) : store(watch_window) {}

  object_store store;
  std::map<std::uint64_t, open_watch> watches;
  std::uint64_t next_watch = 0;
  std::uint64_t served = 0;

  // What each open watch has not seen yet, as the server streams it: one
  // JSON line per change; a 410 ends the stream with an ERROR line.
  void deliver() {
    for (auto it = watches.begin(); it != watches.end();) {
      auto& w = it->second;
      api_status error;
      auto changes = store.changes_since(*w.target.type, w.target.ns, w.resource_version,
                                         w.target.selectors, error);
      if (!changes) {
        w.on_line(watch_event_line("ERROR", error.to_json()));
        auto on_end = std::move(w.on_end);
        it = watches.erase(it);
        on_end(std::nullopt);
        continue;
      }
      if (w.resource_version == 0)
        w.resource_version = store.current_resource_version();
      for (auto& change : *changes) {
        w.resource_version = std::max(w.resource_version, change.resource_version);
        w.on_line(watch_event_line(change.type, change.object));
      }
      ++it;
    }
  }
};

namespace {

class in_process_client final : public kube_client {
public:
  explicit in_process_client(std::shared_ptr<in_process_api::state> s)
    : state_(std::move(s)) {}

  void send(kube_request request, response_handler done) override {
    rest_request r;
    r.verb = request.verb;
    r.path = request.path;
    r.query = parse_query(request.query);
    r.content_type = request.content_type;
    r.body = std::move(request.body);
    ++state_->served;
    auto reply = serve_rest(state_->store, r);
    kube_response response{reply.status, std::move(reply.body)};
    state_->deliver();
    if (reply.status >= 200 && reply.status < 300)
      done(std::move(response));
    else
      done(error_from_response(response, parse_retry_after(reply.retry_after)));
  }

  std::uint64_t watch(kube_request request, line_handler on_line,
                      end_handler on_end) override {
    ++state_->served;
    api_status error;
    auto target =
      resolve_watch(state_->store, request.path, parse_query(request.query), error);
    const auto id = ++state_->next_watch;
    if (!target) {
      on_end(error_from_response({error.code, error.to_json().dump()}));
      return id;
    }
    open_watch w;
    w.resource_version = target->resource_version;
    w.target = std::move(*target);
    w.on_line = std::move(on_line);
    w.on_end = std::move(on_end);
    state_->watches.emplace(id, std::move(w));
    state_->deliver();
    return id;
  }

  void stop_watch(std::uint64_t id) override { state_->watches.erase(id); }

private:
  std::shared_ptr<in_process_api::state> state_;
};

} // namespace

in_process_api::in_process_api(std::size_t watch_window)
  : state_(std::make_shared<state>(watch_window)) {}

std::shared_ptr<kube_client> in_process_api::client() const {
  return std::make_shared<in_process_client>(state_);
}

void in_process_api::with_store(const std::function<void(object_store&)>& f) {
  f(state_->store);
  state_->deliver();
}

const object_store& in_process_api::store() const {
  return state_->store;
}

std::uint64_t in_process_api::requests_served() const {
  return state_->served;
}

} // namespace vigil::kube
