#include "actors/control/console/console_api.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/console/console_assets.hpp"
#include "actors/control/console/console_feed.hpp"
#include "actors/control/console/console_view.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "actors/supervisor/message_stats.hpp"

namespace vigil {

namespace {

using json = nlohmann::json;
constexpr auto ask_timeout = std::chrono::seconds(5);
constexpr std::size_t node_timeline_rows = 200;

http::response json_reply(int status, const json& body) {
  return http::response{
    status, "application/json", {{"Cache-Control", "no-store"}}, body.dump()};
}

http::response error(int status, const std::string& what) {
  return json_reply(status, {{"error", what}});
}

// An actor did not answer: the console says which, and stays up.
auto unavailable(const http::responder& reply, const char* who) {
  return [reply, who](caf::error&) {
    reply(error(503, std::string(who) + " did not answer; try again"));
  };
}

std::string_view content_type_of(std::string_view name) {
  auto ends = [&](std::string_view suffix) {
    return name.size() >= suffix.size()
           && name.substr(name.size() - suffix.size()) == suffix;
  };
  if (ends(".html"))
    return "text/html; charset=utf-8";
  if (ends(".js"))
    return "text/javascript; charset=utf-8";
  if (ends(".css"))
    return "text/css; charset=utf-8";
  if (ends(".svg"))
    return "image/svg+xml";
  return "application/octet-stream";
}

void serve_asset(std::string_view path, const http::responder& reply) {
  if (path == "/console")
    return reply(http::response{301, "", {{"Location", "/console/"}}, ""});
  auto name = path.substr(std::string_view("/console/").size());
  if (name.empty())
    name = "index.html";
  for (const auto& file : console::embedded_files())
    if (file.name == name)
      return reply(http::response{200,
                                  std::string(content_type_of(name)),
                                  {{"Cache-Control", "no-cache"}},
                                  std::string(file.text)});
  reply(error(404, "no console file " + std::string(name)));
}

json journal_figures(const journal_stats& s) {
  return {{"queueDepth", s.queue_depth},
          {"inFlight", s.in_flight},
          {"lagSeconds", static_cast<double>(s.lag_ns) / 1e9},
          {"committed", s.committed},
          {"duplicates", s.duplicates},
          {"refused", s.refused},
          {"available", s.available}};
}

void fleet(caf::event_based_actor* self, const console_actors& a, http::responder reply) {
  self->request(a.fleet, ask_timeout, tile_atom::value)
    .then(
      [=](std::vector<std::string>& summaries) {
        std::vector<console::node_tile> tiles;
        tiles.reserve(summaries.size());
        for (const auto& s : summaries)
          tiles.push_back(console::tile_of(json::parse(s, nullptr, false)));
        self->request(a.fleet, ask_timeout, summary_atom::value)
          .then(
            [=](std::string& fleet_summary) {
              self->request(a.breaker, ask_timeout, summary_atom::value)
                .then(
                  [=](std::string& breaker_summary) {
                    self->request(a.journal, ask_timeout, stats_atom::value)
                      .then(
                        [=](journal_stats& stats) {
                          reply(json_reply(
                            200, console::fleet_page(
                                   tiles, json::parse(fleet_summary, nullptr, false),
                                   json::parse(breaker_summary, nullptr, false),
                                   journal_figures(stats))));
                        },
                        unavailable(reply, "the journal"));
                  },
                  unavailable(reply, "the breaker"));
            },
            unavailable(reply, "the fleet"));
      },
      unavailable(reply, "the fleet"));
}

// The rows a journal read returns, filtered and capped.
json rows_json(const std::vector<journal_record>& rows, const console::row_filter& filter,
               std::size_t limit) {
  json out = json::array();
  for (const auto& row : rows) {
    if (out.size() == limit)
      break;
    if (filter.matches(row))
      out.push_back(console::row_json(row));
  }
  return out;
}

void node(caf::event_based_actor* self, const console_actors& a, const std::string& name,
          http::responder reply) {
  self->request(a.fleet, ask_timeout, summary_atom::value, name)
    .then(
      [=](std::string& summary) {
        journal_query query;
        query.node = name;
        query.limit = node_timeline_rows;
        query.newest = true; // however long the node's history
        self->request(a.journal, ask_timeout, read_atom::value, query)
          .then(
            [=](std::vector<journal_record>& rows) {
              auto node_summary = json::parse(summary, nullptr, false);
              const auto tile = console::tile_of(node_summary);
              auto page = std::make_shared<json>(
                json{{"node", node_summary},
                     {"state", std::string(console::to_string(tile.state))},
                     {"detail", tile.detail},
                     {"timeline", rows_json(rows, {}, node_timeline_rows)},
                     {"actors", json::array()}});
              // Its gpu, nic_port and drain actors' own rows: each NIC
              // port's state, role and link_downed history is the port's.
              self->request(a.fleet, ask_timeout, children_atom::value, name)
                .then(
                  [=](std::vector<std::string>& children) {
                    for (const auto& c : children)
                      (*page)["actors"].push_back(json::parse(c, nullptr, false));
                    reply(json_reply(200, *page));
                  },
                  [=](caf::error&) { reply(json_reply(200, *page)); });
            },
            unavailable(reply, "the journal"));
      },
      [=](caf::error&) { reply(error(404, "no node " + name + " in the fleet")); });
}

// What a named actor says of itself beyond its mailbox figures: the
// summary of those that have one. `done` gets an object (empty: nothing).
void ask_detail(caf::event_based_actor* self, const std::string& name,
                const caf::actor& who, std::function<void(json)> done) {
  auto parsed = [done](std::string& s) {
    auto j = json::parse(s, nullptr, false);
    done(j.is_object() ? j : json::object());
  };
  auto nothing = [done](caf::error&) { done(json::object()); };
  if (name == "fleet" || name == "breaker" || name == "leader" || name == "console_feed")
    self->request(who, ask_timeout, summary_atom::value).then(parsed, nothing);
  else if (name == "ingest")
    self->request(who, ask_timeout, stats_atom::value).then(parsed, nothing);
  else if (name == "journal")
    self->request(who, ask_timeout, stats_atom::value)
      .then(
        [done](journal_stats& s) {
          done({{"queueDepth", s.queue_depth},
                {"inFlight", s.in_flight},
                {"committed", s.committed},
                {"available", s.available}});
        },
        nothing);
  else
    done(json::object());
}

// Every named actor's own answer (its figures and its summary), the node
// actors' through the fleet's gathering and, for `?node=`, that node's own
// actors. What did not answer is listed without figures.
void actor_figures(caf::event_based_actor* self, const console_actors& a,
                   std::string_view query, http::responder reply) {
  auto request = console::parse_actors_request(query);
  if (!request)
    return reply(error(400, request.error().to_string()));
  const auto node = *request;
  struct gathered {
    std::vector<std::string> names;
    std::vector<json> summaries;
    std::vector<std::string> nodes;
    std::vector<json> children;
    std::size_t waiting = 0;
  };
  auto g = std::make_shared<gathered>();
  auto named = a.named;
  if (named.empty()) // the console's own test wiring: the actors it was given
    named = {{"fleet", a.fleet},
             {"breaker", caf::actor_cast<caf::actor>(a.breaker)},
             {"ingest", a.ingest},
             {"journal", caf::actor_cast<caf::actor>(a.journal)},
             {"console_feed", a.feed}};
  for (const auto& [name, who] : named) {
    g->names.push_back(name);
    g->summaries.push_back(json::object());
  }
  auto finish = [=] {
    std::vector<json> nodes;
    for (const auto& s : g->nodes)
      nodes.push_back(json::parse(s, nullptr, false));
    reply(json_reply(
      200, console::actor_table(g->names, g->summaries, nodes, node, g->children)));
  };
  auto children_next = [=] {
    if (node.empty())
      return finish();
    self->request(a.fleet, ask_timeout, children_atom::value, node)
      .then(
        [=](std::vector<std::string>& rows) {
          for (const auto& r : rows)
            g->children.push_back(json::parse(r, nullptr, false));
          finish();
        },
        [=](caf::error&) { finish(); });
  };
  auto nodes_next = [=] {
    self->request(a.fleet, ask_timeout, node_summaries_atom::value)
      .then(
        [=](std::vector<std::string>& s) {
          g->nodes = std::move(s);
          children_next();
        },
        [=](caf::error&) { children_next(); });
  };
  // Two answers per named actor, asked at once; the nodes when all are in.
  g->waiting = 2 * named.size();
  auto one_done = [=] {
    if (--g->waiting == 0)
      nodes_next();
  };
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& who = named[i].second;
    self->request(who, ask_timeout, actor_stats_atom::value)
      .then(
        [=](std::string& s) {
          auto figures = json::parse(s, nullptr, false);
          if (figures.is_object())
            g->summaries[i].update(figures);
          one_done();
        },
        [=](caf::error&) { one_done(); });
    ask_detail(self, named[i].first, who, [=](json detail) {
      // The actor's own figures win over a summary's copy of them.
      detail.update(g->summaries[i]);
      g->summaries[i] = std::move(detail);
      one_done();
    });
  }
}

void journal(caf::event_based_actor* self, const console_actors& a,
             std::string_view query, http::responder reply) {
  auto request = console::parse_journal_request(query);
  if (!request)
    return reply(error(400, request.error().to_string()));
  journal_query read;
  read.after_seq = request->after_seq;
  read.node = request->filter.node;
  read.since = request->from;
  read.until = request->to;
  self->request(a.journal, ask_timeout, read_atom::value, read)
    .then(
      [=, r = *request](std::vector<journal_record>& rows) {
        auto out = rows_json(rows, r.filter, r.limit);
        // Where the next read starts: past what this one looked at, even
        // when the filter kept none of it.
        std::int64_t next = r.after_seq;
        if (out.size() == r.limit)
          next = out.back()["seq"].get<std::int64_t>();
        else if (!rows.empty())
          next = rows.back().seq;
        reply(json_reply(200, {{"rows", out}, {"next", next}}));
      },
      unavailable(reply, "the journal"));
}

// The fleet as the journal had it at `at`: every row up to it (at most
// history_rows), rebuilt as `vigil replay --at` does.
constexpr std::size_t history_rows = 200000;

void history(caf::event_based_actor* self, const console_actors& a,
             std::string_view query, http::responder reply) {
  if (!a.fleet_at)
    return reply(error(404, "no history here"));
  auto request = console::parse_journal_request(query);
  if (!request)
    return reply(error(400, request.error().to_string()));
  if (!request->to)
    return reply(error(400, "at: required, an RFC 3339 time"));
  journal_query read;
  read.until = request->to;
  read.node = request->filter.node;
  read.limit = history_rows;
  self->request(a.journal, ask_timeout, read_atom::value, read)
    .then(
      [=, at = *request->to](std::vector<journal_record>& rows) {
        auto fleet = a.fleet_at(rows, at);
        fleet["rowsRead"] = rows.size();
        fleet["complete"] = rows.size() < history_rows;
        reply(json_reply(200, fleet));
      },
      unavailable(reply, "the journal"));
}

/// (trace_open_atom, shared_ptr<http::body_stream>): the trace's client is there.
using trace_open_atom = caf::atom_constant<caf::atom("traceopen")>;

// One trace's Server-Sent Events (GET /api/v1/trace): once the client is
// there, asks the fleet to arm the node actor's trace (observed<Base>), then
// writes each traced message as a `data:` line and ends with an `end` event.
// A slow client loses lines (counted in the end event); the node actor never
// waits on it. Gone a second after the trace's time, client or not.
caf::behavior tracer(caf::event_based_actor* self, caf::actor fleet,
                     console::trace_request request) {
  auto stream = std::make_shared<std::shared_ptr<http::body_stream>>();
  auto skipped = std::make_shared<std::uint64_t>(0);
  // The node actor sees the time run out only at its next message: the end
  // comes from here when none follows.
  self->delayed_send(self, std::chrono::seconds{request.seconds + 1},
                     trace_end_atom::value, std::string{"the trace's time is up"});
  return {
    [=](trace_open_atom, std::shared_ptr<http::body_stream>& s) {
      *stream = s;
      s->on_close([who = caf::actor{self}] {
        caf::anon_send_exit(who, caf::exit_reason::user_shutdown);
      });
      self->send(fleet, trace_atom::value, request.node, caf::actor{self},
                 request.max_messages, request.seconds);
    },
    [=](trace_line_atom, std::string& line) {
      if (!*stream || (*stream)->pending_bytes() > (1u << 20)) {
        ++*skipped;
        return;
      }
      (*stream)->send("event: message\ndata: " + line + "\n\n");
    },
    [=](trace_end_atom, std::string& why) {
      if (*stream) {
        (*stream)->send("event: end\ndata: "
                        + json{{"why", why}, {"skipped", *skipped}}.dump() + "\n\n");
        (*stream)->end();
      }
      self->quit();
    },
  };
}

void trace(caf::event_based_actor* self, const console_actors& a, std::string_view query,
           http::responder reply) {
  auto request = console::parse_trace_request(query);
  if (!request)
    return reply(error(400, request.error().to_string()));
  auto t = self->spawn(tracer, a.fleet, *request);
  http::response open{200,
                      "text/event-stream",
                      {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}},
                      ": vigil trace of node " + request->node + "\n\n"};
  open.stream = [t](std::shared_ptr<http::body_stream> s) {
    caf::anon_send(t, trace_open_atom::value, std::move(s));
  };
  reply(std::move(open));
}

void stream(const console_actors& a, std::string_view query, http::responder reply) {
  auto request = console::parse_journal_request(query);
  if (!request)
    return reply(error(400, request.error().to_string()));
  http::response open{200,
                      "text/event-stream",
                      {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}},
                      ": vigil journal stream\n\n"};
  open.stream = [feed = a.feed,
                 filter = request->filter](std::shared_ptr<http::body_stream> s) {
    caf::anon_send(feed, feed_open_atom::value, std::move(s), filter);
  };
  reply(std::move(open));
}

} // namespace

console_parts spawn_console(caf::actor_system& system, const control_actors& actors,
                            decltype(console_actors::fleet_at) fleet_at,
                            std::vector<std::pair<std::string, caf::actor>> named) {
  console_parts parts;
  parts.feed = system.spawn(console_feed, console_feed_config{}, actors.journal);
  named.emplace_back("console_feed", parts.feed);
  parts.api = system.spawn(
    console_api, console_actors{actors.fleet, actors.journal, parts.feed, actors.breaker,
                                actors.ingest, std::move(fleet_at), std::move(named)});
  return parts;
}

bool is_console_path(std::string_view path) {
  return path.rfind("/api/v1/", 0) == 0 || path == "/console"
         || path.rfind("/console/", 0) == 0;
}

caf::behavior console_api(caf::event_based_actor* self, console_actors actors) {
  return {
    [=](console_request_atom, http::request& req, http::responder& reply) {
      if (req.method != "GET" && req.method != "HEAD")
        return reply(error(405, "the console is read-only here: use GET"));
      const std::string& path = req.path;
      if (path.rfind("/console", 0) == 0)
        return serve_asset(path, reply);
      if (path == "/api/v1/fleet")
        return fleet(self, actors, reply);
      if (path == "/api/v1/breaker")
        return self->request(actors.breaker, ask_timeout, summary_atom::value)
          .then(
            [=](std::string& s) {
              reply(json_reply(200, json::parse(s, nullptr, false)));
            },
            unavailable(reply, "the breaker"));
      if (path == "/api/v1/actors")
        return actor_figures(self, actors, req.query, reply);
      if (path == "/api/v1/history")
        return history(self, actors, req.query, reply);
      if (path == "/api/v1/journal")
        return journal(self, actors, req.query, reply);
      if (path == "/api/v1/stream")
        return stream(actors, req.query, reply);
      if (path == "/api/v1/trace")
        return trace(self, actors, req.query, reply);
      constexpr std::string_view nodes = "/api/v1/nodes/";
      if (path.rfind(nodes, 0) == 0 && path.size() > nodes.size())
        return node(self, actors, console::url_decode(path.substr(nodes.size())), reply);
      reply(error(404, "no console route " + path));
    },
  };
}

} // namespace vigil
