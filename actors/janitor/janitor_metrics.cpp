#include "actors/janitor/janitor_metrics.hpp"

#include <algorithm>
#include <cstdio>

#include "actors/janitor/gpu_reset_plan.hpp"

namespace vigil {

namespace {

// The reasons every GPU's failure series starts with (seed 001 "Metrics":
// teardown_failed, the reset command, the health check, …).
const std::vector<std::string>& reset_reasons() {
  static const std::vector<std::string> reasons{
    std::string{janitor::failure_reason::teardown_failed},
    std::string{janitor::failure_reason::job_create_failed},
    std::string{janitor::failure_reason::reset_command_failed},
    std::string{janitor::failure_reason::health_check_failed},
    std::string{janitor::failure_reason::gpu_in_use},
    std::string{janitor::failure_reason::job_failed},
    std::string{janitor::failure_reason::timeout},
    std::string{janitor::failure_reason::redeploy_failed}};
  return reasons;
}

const std::vector<std::string>& reboot_reasons() {
  static const std::vector<std::string> reasons{"job_create_failed", "timeout",
                                                "node_not_found"};
  return reasons;
}

// A label value as the text format wants it: \, " and newline escaped.
std::string escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// `node="n",gpu_type="t"`: the labels in the seed's order, without braces.
template <class Labels>
std::string label_text(const Labels& labels) {
  std::string out;
  for (const auto& [name, value] : labels)
    out += (out.empty() ? "" : ",") + std::string{name} + "=\"" + escaped(value) + "\"";
  return out;
}

template <class Labels>
Labels with(Labels labels, const char* name, std::string value) {
  labels.emplace_back(name, std::move(value));
  return labels;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

void sample(std::string& out, const std::string& name, const std::string& labels,
            const std::string& value) {
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
}

void header(std::string& out, const std::string& name, const char* type,
            const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

} // namespace

void janitor_metrics::family_state::start(const label_list& request,
                                          const label_list& group,
                                          const std::vector<std::string>& reasons) {
  ++requests[label_text(request)];
  for (const char* status : {success, failure}) {
    completed[label_text(with(request, "status", status))];
    durations[label_text(with(group, "status", status))];
  }
  for (const auto& reason : reasons)
    failures[label_text(with(group, "reason", reason))];
}

void janitor_metrics::family_state::finish(const label_list& request,
                                           const label_list& group, bool succeeded,
                                           const std::string& reason,
                                           double duration_seconds) {
  const char* status = succeeded ? success : failure;
  ++completed[label_text(with(request, "status", status))];
  if (!succeeded)
    ++failures[label_text(with(group, "reason", reason.empty() ? "unknown" : reason))];
  auto& h = durations[label_text(with(group, "status", status))];
  auto bucket = std::find_if(duration_buckets.begin(), duration_buckets.end(),
                             [&](double le) { return duration_seconds <= le; });
  ++h.counts[static_cast<std::size_t>(bucket - duration_buckets.begin())];
  h.sum += std::max(0.0, duration_seconds);
}

void janitor_metrics::family_state::set_active(
  const std::vector<std::pair<label_list, std::int64_t>>& now_active) {
  for (auto& [labels, value] : active)
    value = 0;
  for (const auto& [labels, value] : now_active)
    active[label_text(labels)] += value;
}

std::int64_t janitor_metrics::family_state::active_total() const {
  std::int64_t n = 0;
  for (const auto& [labels, value] : active)
    n += value;
  return n;
}

void janitor_metrics::family_state::render(std::string& out, const std::string& prefix,
                                           const char* what,
                                           const char* duration_help) const {
  auto counters = [&](const std::string& name, const std::string& help,
                      const std::map<std::string, std::uint64_t>& samples) {
    header(out, name, "counter", help);
    for (const auto& [labels, value] : samples)
      sample(out, name, labels, std::to_string(value));
  };
  counters(prefix + "_requests_total", std::string{what} + " requests taken up.",
           requests);
  counters(prefix + "_requests_completed_total",
           std::string{what}
             + " requests completed, by final status (success or "
               "failure).",
           completed);
  const auto gauge = prefix + "_active_requests";
  header(out, gauge, "gauge", std::string{what} + " requests in progress.");
  for (const auto& [labels, value] : active)
    sample(out, gauge, labels, std::to_string(value));
  counters(prefix + "_failure_reasons_total",
           std::string{"Failed "} + what + " requests, by reason.", failures);
  const auto duration = prefix + "_duration_seconds";
  header(out, duration, "histogram", duration_help);
  for (const auto& [labels, h] : durations) {
    std::uint64_t cumulative = 0;
    const std::string sep = labels.empty() ? "" : ",";
    for (std::size_t i = 0; i < duration_buckets.size(); ++i) {
      cumulative += h.counts[i];
      char le[32];
      std::snprintf(le, sizeof le, "%g", duration_buckets[i]);
      sample(out, duration + "_bucket", labels + sep + "le=\"" + le + "\"",
             std::to_string(cumulative));
    }
    cumulative += h.counts.back();
    sample(out, duration + "_bucket", labels + sep + "le=\"+Inf\"",
           std::to_string(cumulative));
    sample(out, duration + "_sum", labels, number(h.sum));
    sample(out, duration + "_count", labels, std::to_string(cumulative));
  }
}

namespace {

// node, gpu_type (and gpu_id): seed 001's labels of a reset's series.
std::vector<std::pair<const char*, std::string>> gpu_labels(const gpu_reset_labels& gpu,
                                                            bool with_id) {
  std::vector<std::pair<const char*, std::string>> labels{
    {"node", gpu.node}, {"gpu_type", gpu.gpu_type.empty() ? "unknown" : gpu.gpu_type}};
  if (with_id)
    labels.emplace_back("gpu_id", gpu.gpu_id);
  return labels;
}

} // namespace

void janitor_metrics::reset_started(const gpu_reset_labels& gpu) {
  std::lock_guard<std::mutex> lock{mutex_};
  reset_.start(gpu_labels(gpu, true), gpu_labels(gpu, false), reset_reasons());
}

void janitor_metrics::reset_finished(const gpu_reset_labels& gpu, bool succeeded,
                                     const std::string& reason, double duration_seconds) {
  std::lock_guard<std::mutex> lock{mutex_};
  reset_.finish(gpu_labels(gpu, true), gpu_labels(gpu, false), succeeded, reason,
                duration_seconds);
}

void janitor_metrics::set_active_resets(
  const std::map<std::pair<std::string, std::string>, std::int64_t>& active) {
  std::vector<std::pair<label_list, std::int64_t>> now_active;
  for (const auto& [key, value] : active)
    now_active.emplace_back(gpu_labels({key.first, key.second, ""}, false), value);
  std::lock_guard<std::mutex> lock{mutex_};
  reset_.set_active(now_active);
}

void janitor_metrics::reboot_started(const std::string& node) {
  std::lock_guard<std::mutex> lock{mutex_};
  reboot_.start({{"node", node}}, {{"node", node}}, reboot_reasons());
}

void janitor_metrics::reboot_finished(const std::string& node, bool succeeded,
                                      const std::string& reason,
                                      double duration_seconds) {
  std::lock_guard<std::mutex> lock{mutex_};
  reboot_.finish({{"node", node}}, {{"node", node}}, succeeded, reason, duration_seconds);
}

void janitor_metrics::set_active_reboots(
  const std::map<std::string, std::int64_t>& active) {
  std::vector<std::pair<label_list, std::int64_t>> now_active;
  for (const auto& [node, value] : active)
    now_active.push_back({{{"node", node}}, value});
  std::lock_guard<std::mutex> lock{mutex_};
  reboot_.set_active(now_active);
}

std::int64_t janitor_metrics::active_resets() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return reset_.active_total();
}

std::int64_t janitor_metrics::active_reboots() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return reboot_.active_total();
}

std::string janitor_metrics::render() const {
  std::lock_guard<std::mutex> lock{mutex_};
  std::string out;
  reset_.render(out, "gpu_reset", "GPU reset",
                "The end-to-end duration of the reset workflow, from the GPUReset's "
                "creation to its reset Job's completion.");
  reboot_.render(out, "reboot_node", "Node reboot",
                 "From the RebootNode's creation to its outcome.");
  return out;
}

std::string render_janitor_metrics(const janitor_metrics& metrics) {
  return metrics.render();
}

http::handler make_janitor_http_handler(std::shared_ptr<const janitor_metrics> metrics,
                                        std::function<std::string()> more_metrics) {
  return [metrics, more_metrics](http::request req, http::responder reply) {
    http::response r;
    r.content_type = "text/plain; charset=utf-8";
    if (req.method != "GET" && req.method != "HEAD") {
      r.status = 405;
      r.headers.emplace_back("Allow", "GET, HEAD");
      r.body = "use GET\n";
    } else if (req.path == "/metrics") {
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = metrics->render() + (more_metrics ? more_metrics() : std::string{});
    } else if (req.path == "/healthz" || req.path == "/readyz") {
      r.body = "ok\n";
    } else {
      r.status = 404;
      r.body = "not found\n";
    }
    reply(std::move(r));
  };
}

} // namespace vigil
