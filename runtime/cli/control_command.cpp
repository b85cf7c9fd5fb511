#include "runtime/cli/control_command.hpp"

#include <optional>
#include <ostream>

#include <caf/all.hpp>

#include "actors/control/console/console_api.hpp"
#include "actors/control/endpoints/control_endpoints.hpp"
#include "actors/control/fleet/fleet_snapshot.hpp"
#include "actors/protocol/atoms.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/http/http_host.hpp"
#include "runtime/logging.hpp"
#include "runtime/replay/replay_analysis.hpp"

namespace vigil {

std::vector<option_spec> control_option_specs() {
  return {
    {"listen", "HOST:PORT", "overrides control.listen"},
    {"journal", "URL", "overrides journal.url (sqlite:PATH or postgresql://…)"},
    {"kubeconfig", "FILE", "overrides control.kubeconfig"},
    {"token-file", "FILE", "overrides control.token_file"},
    {"plain-http", "", "serve plain HTTP without a certificate (control.plain_http)"},
    {"dry-run", "", "decide and journal only; write nothing to the API server"},
  };
}

int run_control(command_context& ctx) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil control: " << f.to_string() << "\n";
    return 1;
  };
  auto config = ctx.config;
  auto& cc = config.control;
  cc.listen = ctx.args.value("listen").value_or(cc.listen);
  cc.kubeconfig = ctx.args.value("kubeconfig").value_or(cc.kubeconfig);
  cc.token_file = ctx.args.value("token-file").value_or(cc.token_file);
  config.journal.url = ctx.args.value("journal").value_or(config.journal.url);
  cc.dry_run = cc.dry_run || ctx.args.has("dry-run");
  cc.plain_http = cc.plain_http || ctx.args.has("plain-http");

  auto listen = split_listen(cc.listen, "control.listen");
  if (!listen)
    return fail(listen.error());
  control_http_options http_options;
  http_options.limits.max_body_bytes = config.ingest.max_body_bytes;
  http_options.limits.max_line_bytes = config.ingest.limits.max_event_bytes;
  http_options.limits.event = config.ingest.limits;
  http_options.alertmanager = config.alertmanager;
  if (!cc.token_file.empty()) {
    auto token = control::load_token_file(cc.token_file);
    if (!token)
      return fail(token.error());
    http_options.token = std::move(*token);
  } else if (!cc.token_review.enabled) {
    ctx.err << "vigil control: neither control.token_file nor control.token_review: "
               "POST /v1/events accepts anyone\n";
  }
  http::server_options server_options;
  server_options.address = listen->first;
  server_options.port = listen->second;
  server_options.max_body_bytes = config.ingest.max_body_bytes;
  // HTTPS unless plain HTTP is asked for by name.
  std::optional<http::certificate_files> certificate;
  if (!cc.tls_cert_file.empty()) {
    auto cert = http::read_pem_file(cc.tls_cert_file);
    auto key = http::read_pem_file(cc.tls_key_file);
    if (!cert)
      return fail(cert.error());
    if (!key)
      return fail(key.error());
    server_options.cert_pem = *cert;
    server_options.key_pem = *key;
    certificate.emplace(cc.tls_cert_file, cc.tls_key_file, *cert, *key);
  } else if (!cc.plain_http) {
    return fail({"control.tls_cert_file",
                 "not set: vigil control serves HTTPS; mount a certificate and key "
                 "(vigil install does) or set control.plain_http: true (--plain-http) "
                 "to serve plain HTTP behind a proxy that terminates TLS"});
  } else {
    ctx.err << "vigil control: control.plain_http: serving plain HTTP; bearer tokens "
               "and events cross the network unencrypted\n";
  }
  auto store = make_journal_store(config.journal.url);
  if (!store)
    return fail(store.error());
  if (auto opened = (*store)->open(); !opened)
    return fail(opened.error());
  std::optional<api_client_limits> janitor_limits;
  if (config.janitor.in_process)
    janitor_limits = janitor_api_limits(config.janitor);
  auto api = connect_api_server(
    cc.kubeconfig, api_client_limits{double(cc.kube_api_qps), double(cc.kube_api_burst)},
    lease_api_limits(cc.leader_election ? cc.shards : 1,
                     std::chrono::seconds{cc.retry_period_seconds}),
    janitor_limits);
  if (!api)
    return fail(api.error());

  std::shared_ptr<journal_store> journal_db = std::move(*store);
  if (cc.leader_election && cc.shards > 1)
    // Each row stored with its shard, so that every replica's tail reads
    // its own shards' rows and the fleet-wide ones, not the whole journal.
    journal_db->set_tail_routing(fleet_tail_routing(cc.shards));
  const auto source = api->source;
  control_plane_options plane_options;
  plane_options.replica_identity = replica_identity();
  plane_options.coordination_client = api->coordination;
  plane_options.janitor_client = api->janitor;
  if (cc.leader_election && cc.shards > 1) {
    // Every replica follows the journal's tail on a connection of its own,
    // never in front of the appends that acknowledge events.
    auto tail_store = make_journal_store(config.journal.url);
    if (!tail_store)
      return fail(tail_store.error());
    plane_options.journal_tail_db = std::move(*tail_store);
  }
  if (cc.snapshot_interval_seconds > 0) {
    // The fleet's rebuild snapshots read the journal on a connection of
    // their own, away from the appends.
    auto snapshot_store = make_journal_store(config.journal.url);
    if (!snapshot_store)
      return fail(snapshot_store.error());
    plane_options.snapshot_db = std::move(*snapshot_store);
  }

  return run_process(config, [&](process_context& p) -> status {
    auto time = std::make_shared<caf_clock>(p.system.clock(), system_now());
    auto plane =
      spawn_control_plane(p.system, config, journal_db, api->client, time, plane_options);
    if (!plane)
      return plane.error();
    for (const auto& [name, actor] : plane->named)
      caf::anon_send(p.root, adopt_atom::value, name, actor);
    auto http_counters = std::make_shared<http::server_counters>();
    server_options.counters = http_counters;
    plane->actors.http_figures = http_counters;
    auto endpoints_actor = p.system.spawn(endpoints, plane->actors);
    auto console = spawn_console(p.system, plane->actors, fleet_at, plane->named);
    caf::anon_send(p.root, adopt_atom::value, std::string("console"), console.api);
    caf::anon_send(p.root, adopt_atom::value, std::string("console_feed"), console.feed);
    http_options.console = console.api;
    http_options.authenticator = plane->authenticator;
    http_options.agent_tokens = cc.token_review.enabled;
    http_options.metrics_auth = !cc.metrics_readers.empty();
    http_options.retry_after_seconds = static_cast<int>(cc.retry_after_seconds);
    auto server = http::server::start(
      server_options, make_control_handler(plane->actors, endpoints_actor, http_options));
    if (!server)
      return server.error();
    component_logger("control")->info(
      "listening on {}:{} ({}), journal {}, API server via {}{}", listen->first,
      (*server)->port(), server_options.cert_pem.empty() ? "HTTP" : "HTTPS",
      journal_db->describe(), source,
      cc.dry_run                  ? ", DRY RUN"
      : config.quarantine.dry_run ? ", DRY RUN from the quarantine stage on"
                                  : "");
    caf::anon_send(p.root, adopt_atom::value, std::string("endpoints"), endpoints_actor);
    caf::anon_send(p.root, adopt_atom::value, std::string("http"),
                   spawn_http_host(p.system, std::move(*server), std::move(certificate)));
    return ok();
  });
}

} // namespace vigil
