// POST /v1/alertmanager: Prometheus Alertmanager's webhook (payload version 4)
// as HealthEvents, so any PrometheusRule (on dcgm-exporter's metrics, say)
// can drive vigil. A firing alert is an unhealthy event, a resolved one the
// healthy event that clears it; the node and GPU come from the alert's labels.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "actors/control/ingest/ingest_logic.hpp"

namespace vigil::control {

/// How an alert becomes an event (the `alertmanager:` section of vigil.yaml).
struct alertmanager_mapping {
  /// Labels naming the node, first present wins: kube-state-metrics and
  /// relabelled scrapes say `node`, dcgm-exporter says `Hostname`.
  std::vector<std::string> node_labels = {"node", "kubernetes_node", "Hostname",
                                          "hostname"};
  /// Labels naming the GPU (an entity GPU_UUID) and its PCI address (PCI).
  std::vector<std::string> gpu_labels = {"UUID", "uuid", "gpu_uuid"};
  std::vector<std::string> pci_labels = {"pci_bus_id"};
  std::string agent = "alertmanager";
  /// The event's componentClass: the label `component_class` when set, else this.
  std::string component_class = "GPU";
  /// recommendedAction: the label or annotation `vigil_recommended_action`
  /// (a name or NVSentinel's number) when set, else this.
  recommended_action default_action = recommended_action::none;
  /// An alert with one of these `severity` labels is fatal (so the default
  /// quarantine rule acts on it), as is one recommending an action.
  std::vector<std::string> fatal_severities = {"critical"};
};

/// Decodes a webhook body into one item per alert (numbered from 1, "alert N
/// (alertname)" in errors). checkName is the alertname, errorCode the
/// alertname too, the message the summary or description annotation; the
/// labels go to metadata. The id is derived from the alert's fingerprint,
/// status and start, so Alertmanager's repeats are duplicates. An alert
/// without a node label, or with an unknown action, is a per-item error.
/// Whole-request failures (415, 413, 400) as parse_ingest_body's, plus a body
/// that is not a webhook payload.
expected<std::vector<ingest_item>>
parse_alertmanager_body(std::string_view body, std::string_view content_type,
                        const alertmanager_mapping& mapping, const ingest_limits& limits);

} // namespace vigil::control
