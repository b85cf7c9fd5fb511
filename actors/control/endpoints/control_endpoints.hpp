// The HTTP face of `vigil control`: POST /v1/events (ingest), POST
// /v1/breaker/reset, GET /metrics (Prometheus text), /healthz and /readyz,
// and the console's /api/v1/ and /console/ (handed to its own actor).
// The handler runs on the server's I/O thread and never blocks: it parses,
// checks the token, and hands the request to an actor with the responder.
#pragma once

#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/fleet/snapshot_actor.hpp"
#include "actors/control/ingest/alertmanager.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/ingest/ingest_logic.hpp"
#include "actors/gateway/kube_gateway.hpp"
#include "actors/janitor/janitor_actor.hpp"
#include "actors/journal/journal_messages.hpp"
#include "runtime/http/http_server.hpp"
#include "runtime/metrics/metrics.hpp"

namespace vigil {

struct control_actors {
  caf::actor ingest;
  journal_handle journal;
  caf::actor fleet;
  breaker_handle breaker;
  /// The in-process janitor's figures; null when it runs elsewhere.
  std::shared_ptr<const janitor_metrics> janitor_figures;
  /// The Kubernetes gateway's figures; null when there is none.
  std::shared_ptr<const kube_gateway_stats> gateway_figures;
  /// The HTTPS server's connection and request counters; null before it exists.
  std::shared_ptr<const http::server_counters> http_figures;
  /// The fleet snapshots' and journal retention's figures; null: no
  /// snapshots taken by this process.
  std::shared_ptr<const snapshot_stats> snapshot_figures;
  /// Ingest's word on shedding, read before a body is parsed; null: none.
  std::shared_ptr<ingest_gate> admission_gate;
};

/// Asks the actors for their figures and answers /metrics, /readyz and the
/// breaker reset: (metrics_atom | ready_atom | reset_atom, http::responder).
struct endpoints_state {
  control_actors actors;
  static inline const char* name = "endpoints";
};
using endpoints_actor = caf::stateful_actor<endpoints_state>;

caf::behavior endpoints(endpoints_actor* self, control_actors actors);

struct control_http_options {
  control::ingest_limits limits;
  /// POST /v1/alertmanager: alerts → events (the `alertmanager:` section).
  control::alertmanager_mapping alertmanager;
  /// The operator's static token (any node); "" = none.
  std::string token;
  /// TokenReview of bearer tokens (actors/control/auth); null = none.
  caf::actor authenticator;
  /// Agents' projected tokens are accepted (control.token_review). With
  /// neither this nor `token`, anyone may post (a warning at startup).
  bool agent_tokens = false;
  /// /metrics needs the static token or a reader's token
  /// (control.metrics_readers); otherwise it is open.
  bool metrics_auth = false;
  int retry_after_seconds = 2; ///< Retry-After when the API server cannot check a token
  /// The console's API actor (actors/control/console/console_api.hpp): it
  /// answers /api/v1/… and /console/… for the static token or a reader's
  /// token, like /metrics. Null: those paths are 404.
  caf::actor console;
  /// The console without a token (`vigil demo --serve` on loopback only).
  bool console_open = false;
};

/// The request handler for http::server::start.
http::handler make_control_handler(control_actors actors, caf::actor endpoints,
                                   control_http_options options);

/// The gateway's figures (vigil_kube_*) as metric families.
metrics::family_list gateway_metric_families(const kube_gateway_stats& stats);
/// vigil_fleet_snapshots_total and the rest of the snapshot actor's figures.
metrics::family_list snapshot_metric_families(const snapshot_stats& stats);

/// vigil_http_*: connections, requests, and each kind of bad client the
/// server turned away (too large, malformed, incomplete, slow, not TLS, over
/// the connection limit).
metrics::family_list http_metric_families(const http::server_counters& counters);
/// Their Prometheus text; for tests.
std::string render_gateway_metrics(const kube_gateway_stats& stats);

/// The figures the actors reported (JSON objects as they answer
/// summary/stats requests) as metric families; pure.
metrics::family_list control_metric_families(const std::string& ingest_stats,
                                             const std::string& fleet_summary,
                                             const std::string& breaker_summary,
                                             const journal_stats& journal);
/// Their Prometheus text; for tests.
std::string render_metrics(const std::string& ingest_stats,
                           const std::string& fleet_summary,
                           const std::string& breaker_summary,
                           const journal_stats& journal);

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::http::responder)
