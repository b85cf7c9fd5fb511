// bench/journal: HealthEvents through the journal actor into PostgreSQL
// versus raw COPY through psql into an identical table, and append→ack
// latency at a steady rate. A benchmark, not a test: it reads the wall clock
// and prints figures for BENCHMARKS.md. With CORDONS > 0 it measures only
// what a sharded replica adds to each new cordon: journal_store::claim_cordon
// (the fleet-wide breaker window, issue 22), from 1 and from 4 connections
// at once.
//
//   bench_journal URL [EVENTS=1000000] [RATE=10000] [SECONDS=10]
//                 [BATCH_DELAY_MS=5] [CORDONS=0] [RESENT_PERCENT=0]
//
// With RESENT_PERCENT > 0 it then appends EVENTS more, that share of them
// keys already stored (spread evenly), as agents resend after a 503.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <libpq-fe.h>

#include "actors/journal/journal_actor.hpp"

using namespace vigil;
using bench_clock = std::chrono::steady_clock;

namespace {

using tick_atom = caf::atom_constant<caf::atom("tick")>;

// ~400 bytes of HealthEvent JSON, unique per i.
journal_record make_row(std::int64_t i, const std::string& run) {
  health_event e;
  e.id = run + "-" + std::to_string(i);
  e.agent = "vigil-agent";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = true;
  e.message = "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR";
  e.action = recommended_action::component_reset;
  e.error_codes = {"48"};
  e.entities = {{"PCI", "0000:03:00"},
                {"GPU_UUID", "GPU-455d8f70-2051-db6c-0430-ffc457bff834"}};
  e.node_name = "gpu-node-" + std::to_string(i % 10000);
  e.generated = from_unix(1761219482 + i, 0);
  return {0, *e.generated, e.node_name, "event", e.id, encode_health_event(e)};
}

double seconds_since(bench_clock::time_point t0) {
  return std::chrono::duration<double>(bench_clock::now() - t0).count();
}

bool exec(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok)
    std::cerr << sql << ": " << PQerrorMessage(conn);
  PQclear(r);
  return ok;
}

struct driver_state {
  std::vector<journal_record> rows;
  size_t sent = 0;
  size_t acked = 0;
};

// Keeps up to `window` appends outstanding until every row is acknowledged,
// then tells `reporter`. Event-based, so the driver costs little beside the journal.
// No request timeout: CAF 0.17 cancels a request's timeout with a linear scan
// over the actor's pending timeouts, which is quadratic with 50,000 in flight.
caf::behavior append_driver(caf::stateful_actor<driver_state>* self, journal_handle jrnl,
                            std::vector<journal_record> rows, caf::actor reporter) {
  // CAF 0.17 keeps an actor's pending responses in a flat map with linear
  // lookup and erase: more than a few thousand in flight turn quadratic.
  constexpr size_t window = 4096;
  self->state.rows = std::move(rows);
  auto send_more = [=] {
    auto& st = self->state;
    while (st.sent < st.rows.size() && st.sent - st.acked < window) {
      self
        ->request(jrnl, caf::infinite, append_atom::value, std::move(st.rows[st.sent++]))
        .then([=](const append_outcome&) {
          auto& s = self->state;
          if (++s.acked == s.rows.size()) {
            self->send(reporter, caf::ok_atom::value);
            self->quit();
          }
        });
    }
  };
  self->send(self, tick_atom::value);
  return {[=](tick_atom) {
    send_more();
    if (self->state.sent < self->state.rows.size())
      self->send(self, tick_atom::value);
  }};
}

// Seconds until every one of `rows` is acknowledged.
double time_appends(caf::actor_system& sys, const journal_handle& jrnl,
                    std::vector<journal_record> rows) {
  caf::scoped_actor self{sys};
  const auto t0 = bench_clock::now();
  sys.spawn(append_driver, jrnl, std::move(rows), caf::actor_cast<caf::actor>(self));
  self->receive([](caf::ok_atom) {});
  return seconds_since(t0);
}

double append_through_actor(caf::actor_system& sys, const journal_handle& jrnl,
                            std::int64_t total, const std::string& run) {
  std::vector<journal_record> rows;
  rows.reserve(static_cast<size_t>(total));
  for (std::int64_t i = 0; i < total; ++i)
    rows.push_back(make_row(i, run));
  return time_appends(sys, jrnl, std::move(rows));
}

// `total` appends of which every `every`th re-sends a key of `stored` (the
// run that stored rows 0..total-1), as agents resend requests answered 503.
double append_with_resends(caf::actor_system& sys, const journal_handle& jrnl,
                           std::int64_t total, int every, const std::string& stored,
                           const std::string& run) {
  std::vector<journal_record> rows;
  rows.reserve(static_cast<size_t>(total));
  for (std::int64_t i = 0; i < total; ++i)
    rows.push_back(i % every == 0 ? make_row(i, stored) : make_row(i, run));
  return time_appends(sys, jrnl, std::move(rows));
}

double copy_through_psql(const std::string& url, std::int64_t total,
                         const std::string& run) {
  const std::string path = "/tmp/vigil-bench-copy.tsv";
  {
    std::ofstream out(path);
    for (std::int64_t i = 0; i < total; ++i) {
      auto r = make_row(i, run + "c");
      std::string body;
      for (char c : r.body) {
        if (c == '\\')
          body += "\\\\";
        else
          body += c;
      }
      out << r.recorded_at.time_since_epoch().count() << '\t' << r.node << '\t' << r.kind
          << '\t' << r.idempotency_key << '\t' << body << '\n';
    }
  }
  const auto command = "psql -q '" + url
                       + "' -c \"\\copy journal_copy (recorded_at_ns, node, kind, "
                         "idempotency_key, body) FROM '"
                       + path + "'\"";
  const auto t0 = bench_clock::now();
  if (std::system(command.c_str()) != 0) {
    std::cerr << "psql COPY failed\n";
    std::exit(1);
  }
  const double s = seconds_since(t0);
  std::remove(path.c_str());
  return s;
}

struct probe_state {
  std::int64_t next = 0;
  std::int64_t remaining = 0;
  std::vector<double> latencies_ms;
  std::string run;
};

// Sends `per_tick` appends every millisecond and records append→ack times.
caf::behavior latency_probe(caf::stateful_actor<probe_state>* self, journal_handle jrnl,
                            std::int64_t total, int per_tick, std::string run,
                            caf::actor reporter) {
  self->state.remaining = total;
  self->state.run = std::move(run);
  self->send(self, tick_atom::value);
  return {
    [=](tick_atom) {
      for (int i = 0; i < per_tick && self->state.next < total; ++i) {
        const auto sent = bench_clock::now();
        self
          ->request(jrnl, std::chrono::seconds{60}, append_atom::value,
                    make_row(self->state.next++, self->state.run))
          .then([=](const append_outcome&) {
            self->state.latencies_ms.push_back(
              std::chrono::duration<double, std::milli>(bench_clock::now() - sent)
                .count());
            if (--self->state.remaining == 0) {
              self->send(reporter, self->state.latencies_ms);
              self->quit();
            }
          });
      }
      if (self->state.next < total)
        self->delayed_send(self, std::chrono::milliseconds{1}, tick_atom::value);
    },
  };
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

} // namespace

// `claims` cordon claims per connection from `connections` connections at
// once, each for its own node, all granted; the latency of each claim.
std::vector<double> claim_cordons(const std::string& url, int claims, int connections,
                                  const std::string& run) {
  std::vector<std::vector<double>> per(static_cast<std::size_t>(connections));
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c)
    threads.emplace_back([&, c] {
      auto made = make_journal_store(url);
      if (!made || !(*made)->open())
        return;
      for (int i = 0; i < claims; ++i) {
        cordon_ask ask;
        ask.node = run + "-" + std::to_string(c) + "-" + std::to_string(i);
        ask.now = system_now();
        ask.window = std::chrono::minutes(5);
        ask.over_limit = [](std::size_t) { return std::optional<std::string>{}; };
        const auto t0 = bench_clock::now();
        auto claim = (*made)->claim_cordon(ask);
        if (claim && claim->granted)
          per[static_cast<std::size_t>(c)].push_back(seconds_since(t0) * 1000.0);
      }
    });
  for (auto& t : threads)
    t.join();
  std::vector<double> all;
  for (const auto& p : per)
    all.insert(all.end(), p.begin(), p.end());
  return all;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: bench_journal URL [EVENTS] [RATE] [SECONDS] [BATCH_DELAY_MS] "
                 "[CORDONS] [RESENT_PERCENT]\n";
    return 2;
  }
  const std::string url = argv[1];
  const std::int64_t events = argc > 2 ? std::stoll(argv[2]) : 1000000;
  const int rate = argc > 3 ? std::stoi(argv[3]) : 10000;
  const int seconds = argc > 4 ? std::stoi(argv[4]) : 10;
  const int delay_ms = argc > 5 ? std::stoi(argv[5]) : 5;
  const int cordons = argc > 6 ? std::stoi(argv[6]) : 0;
  const int resent_percent = argc > 7 ? std::stoi(argv[7]) : 0;
  const std::string run = std::to_string(bench_clock::now().time_since_epoch().count());
  if (cordons > 0) {
    for (int connections : {1, 4}) {
      const auto t0 = bench_clock::now();
      auto latencies =
        claim_cordons(url, cordons, connections, run + "c" + std::to_string(connections));
      const double took = seconds_since(t0);
      std::printf("claim_cordon, %d connection(s) x %d: %zu granted in %.2f s "
                  "(%.0f/s), p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                  connections, cordons, latencies.size(), took,
                  static_cast<double>(latencies.size()) / took,
                  percentile(latencies, 0.5), percentile(latencies, 0.99),
                  percentile(latencies, 1.0));
    }
    return 0;
  }

  auto made = make_journal_store(url);
  if (!made || !(*made)->open()) {
    std::cerr << "cannot open " << url << "\n";
    return 1;
  }
  std::shared_ptr<journal_store> store = std::move(*made);
  PGconn* conn = PQconnectdb(url.c_str());
  PQsetNoticeProcessor(
    conn, [](void*, const char*) {}, nullptr);
  exec(conn, "DROP TABLE IF EXISTS journal_copy");
  exec(conn, "CREATE TABLE journal_copy (LIKE journal INCLUDING ALL)");

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{2});
  caf::actor_system sys{cfg};
  journal_config config;
  config.batch_max_events = 1000;
  config.batch_max_delay_ms = static_cast<std::uint32_t>(delay_ms);
  config.queue_capacity = 100000;
  auto writer = sys.spawn<caf::detached>(journal_writer, store);
  auto jrnl = sys.spawn(journal, config, writer);

  const std::int64_t probe_total = static_cast<std::int64_t>(rate) * seconds;
  {
    caf::scoped_actor self{sys};
    sys.spawn(latency_probe, jrnl, probe_total, rate / 1000, run + "l",
              caf::actor_cast<caf::actor>(self));
    self->receive([&](const std::vector<double>& latencies) {
      std::printf("append->ack at %d events/s for %d s: p50 %.2f ms, p99 %.2f ms, "
                  "max %.2f ms\n",
                  rate, seconds, percentile(latencies, 0.5), percentile(latencies, 0.99),
                  percentile(latencies, 1.0));
    });
  }
  const double actor_s = append_through_actor(sys, jrnl, events, run);
  const double copy_s = copy_through_psql(url, events, run);
  const double actor_rate = static_cast<double>(events) / actor_s;
  const double copy_rate = static_cast<double>(events) / copy_s;
  std::printf("events: %lld of %zu bytes\n", static_cast<long long>(events),
              make_row(0, run).body.size());
  std::printf("journal actor -> PostgreSQL: %.2f s, %.0f events/s\n", actor_s,
              actor_rate);
  std::printf("psql \\copy (raw COPY):       %.2f s, %.0f events/s\n", copy_s, copy_rate);
  std::printf("ratio: %.2f\n", actor_rate / copy_rate);
  if (resent_percent > 0) {
    const double resend_s =
      append_with_resends(sys, jrnl, events, 100 / resent_percent, run, run + "r");
    std::printf("journal actor -> PostgreSQL, %d%% of appends resent: %.2f s, %.0f "
                "events/s\n",
                resent_percent, resend_s, static_cast<double>(events) / resend_s);
  }

  caf::anon_send_exit(jrnl, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  PQfinish(conn);
  return 0;
}
