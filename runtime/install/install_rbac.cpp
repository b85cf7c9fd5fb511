// ServiceAccounts and least-privilege RBAC: no `*` verb or resource, each
// account holds what its process calls and nothing more.
#include "runtime/install/install_support.hpp"

#include <algorithm>
#include <map>

namespace vigil::install::detail {

namespace {

using strings = std::vector<std::string>;

object rule(strings groups, strings resources, strings verbs, strings names = {}) {
  object r = {{"apiGroups", groups}, {"resources", resources}};
  if (!names.empty())
    r["resourceNames"] = names;
  r["verbs"] = verbs;
  return r;
}

object service_account(const std::string& name, const std::string& ns,
                       const std::string& component, bool token) {
  auto sa = header("v1", "ServiceAccount", name, ns, component);
  if (!token)
    sa["automountServiceAccountToken"] = false;
  return sa;
}

object role(const std::string& kind, const std::string& name, const std::string& ns,
            const std::string& component, object rules) {
  auto r = header("rbac.authorization.k8s.io/v1", kind, name, ns, component);
  r["rules"] = std::move(rules);
  return r;
}

// A (Cluster)RoleBinding of `role_kind` `role_name` to ServiceAccounts given
// as {namespace, name}.
object binding(const std::string& kind, const std::string& name, const std::string& ns,
               const std::string& component, const std::string& role_kind,
               const std::string& role_name,
               const std::vector<std::pair<std::string, std::string>>& accounts) {
  auto b = header("rbac.authorization.k8s.io/v1", kind, name, ns, component);
  b["roleRef"] = {
    {"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role_name}};
  object subjects = object::array();
  for (const auto& [account_ns, account] : accounts)
    subjects.push_back(
      {{"kind", "ServiceAccount"}, {"name", account}, {"namespace", account_ns}});
  b["subjects"] = std::move(subjects);
  return b;
}

const strings crd_plurals{"gpuresets", "rebootnodes", "terminatenodes"};

strings status_of(const strings& plurals) {
  strings out;
  for (const auto& p : plurals)
    out.push_back(p + "/status");
  return out;
}

object control_rules(const std::vector<custom_action_config>& custom_actions) {
  object rules = {
    rule({""}, {"nodes"}, {"get", "list", "watch", "patch"}),
    rule({""}, {"nodes/status"}, {"patch"}),
    rule({""}, {"pods"}, {"get", "list", "delete"}),
    rule({""}, {"pods/eviction"}, {"create"}),
    rule({"resource.k8s.io"}, {"resourceclaims", "resourceslices"}, {"get", "list"}),
    rule({""}, {"events"}, {"create"}),
    rule({"vigil.dev"}, crd_plurals, {"get", "list", "create"}),
    // Agents' tokens (control.token_review).
    rule({"authentication.k8s.io"}, {"tokenreviews"}, {"create"}),
  };
  // The operators' own CR kinds for CUSTOM events (remediation.custom_actions),
  // one rule per group: vigil creates and reads them; their controller acts.
  std::map<std::string, strings> plurals_by_group;
  for (const auto& a : custom_actions) {
    auto& plurals = plurals_by_group[a.api_version.substr(0, a.api_version.find('/'))];
    if (std::find(plurals.begin(), plurals.end(), a.plural) == plurals.end())
      plurals.push_back(a.plural);
  }
  for (const auto& [group, plurals] : plurals_by_group)
    rules.push_back(rule({group}, plurals, {"get", "list", "create"}));
  return rules;
}

object janitor_rules() {
  return {
    // patch also adds and removes the GPUReset's finalizer; the Jobs'
    // ownerReferences set blockOwnerDeletion: false, so no */finalizers.
    rule({"vigil.dev"}, crd_plurals, {"get", "list", "watch", "update", "patch"}),
    rule({"vigil.dev"}, status_of(crd_plurals), {"get", "update", "patch"}),
    // The GPU operator's deploy labels (torn down and restored), boot ID, Ready.
    rule({""}, {"nodes"}, {"get", "list", "watch", "patch"}),
    // Waiting for the operands to leave the node.
    rule({""}, {"pods"}, {"get", "list", "watch"}),
    rule({"", "events.k8s.io"}, {"events"}, {"create", "patch"}),
  };
}

} // namespace

std::vector<manifest> rbac_manifests(const install_context& ctx) {
  const auto& janitor = ctx.config.janitor;
  const std::pair<std::string, std::string> control{ctx.ns, "vigil-control"};
  const std::pair<std::string, std::string> janitor_account{ctx.ns, "vigil-janitor"};
  // Who runs the GPUReset/RebootNode controllers (janitor.in_process).
  const auto controllers = janitor.in_process ? control : janitor_account;

  std::vector<manifest> out;
  out.push_back({"`vigil control`: the API calls below, and its Lease.",
                 service_account("vigil-control", ctx.ns, "control", true)});
  out.push_back({"`vigil agent` calls no Kubernetes API (its node's events go to\n"
                 "vigil-control; the kubelet's PodResources socket needs no token). Its\n"
                 "projected token (audience control.token_review.audience) only proves\n"
                 "to vigil-control which node it runs on.",
                 service_account("vigil-agent", ctx.ns, "agent", false)});
  if (!janitor.in_process)
    out.push_back({"`vigil janitor` on its own (janitor.in_process: false).",
                   service_account("vigil-janitor", ctx.ns, "janitor", true)});
  out.push_back(
    {"The GPU reset and validation Jobs' account (seed 001 \"Security\"):\n"
     "no permissions, no token.",
     service_account(janitor.reset_service_account, ctx.job_ns, "gpu-reset-job", false)});
  out.push_back(
    {"The reboot and bug report Jobs' account: privileged on their node\n"
     "(hostPID, nsenter), nothing against the API.",
     service_account(janitor.reboot_service_account, ctx.job_ns, "reboot-job", false)});

  out.push_back({"Quarantine (Nodes, their status), drain (pods, evictions), DRA\n"
                 "allocations, an Event per decision, the maintenance CRs, TokenReviews\n"
                 "of the agents' tokens.",
                 role("ClusterRole", "vigil-control", "", "control",
                      control_rules(ctx.config.remediation.custom_actions))});
  out.push_back({"", binding("ClusterRoleBinding", "vigil-control", "", "control",
                             "ClusterRole", "vigil-control", {control})});
  // Sharded (control.shards > 1), the shard elector lists the member and
  // shard Leases once per look.
  std::vector<std::string> lease_verbs{"get", "create", "update"};
  if (ctx.config.control.shards > 1)
    lease_verbs.push_back("list");
  out.push_back(
    {"Leader election: the Lease control.lease_name in control.lease_namespace\n"
     "(and, sharded, <lease_name>-shard-N and <lease_name>-member-<pod>).",
     role("Role", "vigil-control-lease", ctx.ns, "control",
          {rule({"coordination.k8s.io"}, {"leases"}, lease_verbs)})});
  out.push_back({"", binding("RoleBinding", "vigil-control-lease", ctx.ns, "control",
                             "Role", "vigil-control-lease", {control})});

  out.push_back({"The GPUReset, RebootNode and TerminateNode controllers (seed 001).",
                 role("ClusterRole", "vigil-janitor", "", "janitor", janitor_rules())});
  out.push_back({"", binding("ClusterRoleBinding", "vigil-janitor", "", "janitor",
                             "ClusterRole", "vigil-janitor", {controllers})});
  out.push_back(
    {"The Jobs live in janitor.job_namespace only; the controllers read the\n"
     "reset Job's log and the reset script's ConfigMap there.",
     role("Role", "vigil-janitor-jobs", ctx.job_ns, "janitor",
          {rule({"batch"}, {"jobs"}, {"get", "list", "watch", "create", "delete"}),
           rule({""}, {"pods/log"}, {"get"}),
           rule({""}, {"configmaps"}, {"get"}, {janitor.reset_script_config_map})})});
  std::vector<std::pair<std::string, std::string>> job_creators{control};
  if (!janitor.in_process)
    job_creators.push_back(janitor_account);
  out.push_back({"The control plane creates the validation Jobs there too.",
                 binding("RoleBinding", "vigil-janitor-jobs", ctx.job_ns, "janitor",
                         "Role", "vigil-janitor-jobs", job_creators)});

  out.push_back(
    {"For automation that files maintenance CRs by hand; bind it to automation\n"
     "accounts only (seed 001 \"Security\"). Nothing is bound to it here.",
     role("ClusterRole", "vigil-maintenance-requester", "", "janitor",
          {rule({"vigil.dev"}, crd_plurals,
                {"get", "list", "watch", "create", "delete"})})});
  return out;
}

} // namespace vigil::install::detail
