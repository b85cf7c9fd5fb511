#include "runtime/cli/janitor_command.hpp"

#include <ostream>

#include <caf/all.hpp>

#include "actors/control/endpoints/control_endpoints.hpp"
#include "actors/gateway/kube_gateway.hpp"
#include "actors/janitor/janitor_actor.hpp"
#include "actors/janitor/janitor_metrics.hpp"
#include "actors/protocol/atoms.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/http/http_host.hpp"
#include "runtime/logging.hpp"

namespace vigil {

std::vector<option_spec> janitor_option_specs() {
  return {
    {"kubeconfig", "FILE", "overrides control.kubeconfig"},
    {"listen", "HOST:PORT", "overrides janitor.listen (GET /metrics, /healthz)"},
  };
}

int run_janitor(command_context& ctx) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil janitor: " << f.to_string() << "\n";
    return 1;
  };
  auto config = ctx.config;
  config.control.kubeconfig =
    ctx.args.value("kubeconfig").value_or(config.control.kubeconfig);
  config.janitor.listen = ctx.args.value("listen").value_or(config.janitor.listen);
  auto listen = split_listen(config.janitor.listen, "janitor.listen");
  if (!listen)
    return fail(listen.error());
  // The janitor holds no Lease: its Lease client stays idle.
  auto api =
    connect_api_server(config.control.kubeconfig, janitor_api_limits(config.janitor),
                       lease_api_limits(1, std::chrono::seconds{1}));
  if (!api)
    return fail(api.error());
  std::shared_ptr<kube::kube_client> kube_client = api->client;
  auto options = janitor_settings_from(config.janitor);
  const auto source = api->source;
  return run_process(config, [&](process_context& p) -> status {
    auto time = std::make_shared<caf_clock>(p.system.clock(), system_now());
    auto gateway_figures = std::make_shared<kube_gateway_stats>();
    auto gateway = p.system.spawn(kube_gateway, kube_client, gateway_figures);
    auto janitor = p.system.spawn(janitor_controllers, options, gateway, time);
    caf::anon_send(p.root, adopt_atom::value, std::string("gateway"),
                   caf::actor_cast<caf::actor>(gateway));
    caf::anon_send(p.root, adopt_atom::value, std::string("janitor"), janitor);
    // seed 001 "Metrics": the same gpu_reset_* families as `vigil control`'s.
    http::server_options server_options;
    server_options.address = listen->first;
    server_options.port = listen->second;
    auto server = http::server::start(
      server_options, make_janitor_http_handler(options.metrics, [gateway_figures] {
        return gateway_metric_families(*gateway_figures);
      }));
    if (!server)
      return server.error();
    component_logger("janitor")->info(
      "GPUReset and RebootNode controllers running; API server via {}; Jobs in {}; "
      "/metrics on {}:{}",
      source, options.gpu_reset.job_namespace, listen->first, (*server)->port());
    caf::anon_send(p.root, adopt_atom::value, std::string("http"),
                   spawn_http_host(p.system, std::move(*server)));
    return ok();
  });
}

} // namespace vigil
