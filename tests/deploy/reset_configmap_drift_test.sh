#!/usr/bin/env bash
# The janitor's reset Job finds what it mounts and runs as:
#  - deploy/janitor/reset-script-configmap.yaml is exactly what
#    scripts/render-reset-configmap renders from deploy/janitor/gpu-reset.sh;
#  - the ConfigMap, the privileged namespace and the Job's ServiceAccount
#    carry the names config/vigil.yaml and runtime/config.hpp give the
#    janitor (job_namespace, reset_script_config_map, reset_service_account),
#    and the ConfigMap's key is the file the Job runs
#    (actors/janitor/gpu_reset_plan.cpp: /opt/vigil/gpu-reset.sh).
# Plain bash, grep and awk: no cluster, no network.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# 1. No drift between the script and its ConfigMap.
configmap=deploy/janitor/reset-script-configmap.yaml
rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT
scripts/render-reset-configmap - >"$rendered"
if ! diff -u "$configmap" "$rendered"; then
  fail "$configmap differs from the rendered deploy/janitor/gpu-reset.sh;" \
    "run scripts/render-reset-configmap"
fi

# The literal block gives the script back: strip the 4-space indent.
if ! awk 'body { sub(/^    /, ""); print; next } /^  gpu-reset\.sh: \|$/ { body = 1 }' \
  "$configmap" | cmp -s - deploy/janitor/gpu-reset.sh; then
  fail "$configmap's data.gpu-reset.sh is not deploy/janitor/gpu-reset.sh"
fi

# 2. The names the code uses. value FILE KEY: the first `KEY: value` (YAML)
# or `KEY = "value"` (C++ default) in FILE.
value() {
  sed -nE "s/^[[:space:]]*(std::string[[:space:]]+)?$2(:[[:space:]]*|[[:space:]]*=[[:space:]]*\")([^\";]+)\"?;?[[:space:]]*$/\3/p" \
    "$1" | head -n 1
}
job_namespace='' reset_script_config_map='' reset_service_account=''
for key in job_namespace reset_script_config_map reset_service_account; do
  yaml=$(value config/vigil.yaml "$key")
  cpp=$(value runtime/config.hpp "$key")
  [ -n "$yaml" ] || fail "config/vigil.yaml: janitor.$key not found"
  [ "$yaml" = "$cpp" ] \
    || fail "janitor.$key: config/vigil.yaml '$yaml', runtime/config.hpp default '$cpp'"
  printf -v "$key" '%s' "$yaml"
done

# metadata FILE KIND NAME NAMESPACE: FILE holds that object. Documents are
# split at `---`; only metadata's own two-space-indented keys count.
has_object() {
  awk -v kind="$2" -v name="$3" -v ns="$4" '
    function check() { if (k == kind && n == name && s == ns) found = 1 }
    /^---/ { check(); k = n = s = ""; meta = 0; next }
    /^kind:/ { k = $2 }
    /^metadata:/ { meta = 1; next }
    /^[^ #]/ { meta = 0 }
    meta && /^  name:/ { n = $2 }
    meta && /^  namespace:/ { s = $2 }
    END { check(); exit !found }' "$1"
}

has_object "$configmap" ConfigMap "$reset_script_config_map" "$job_namespace" \
  || fail "$configmap: no ConfigMap $job_namespace/$reset_script_config_map"
grep -q '^  gpu-reset\.sh: |$' "$configmap" \
  || fail "$configmap: no data key gpu-reset.sh"
grep -q '"/gpu-reset\.sh"' actors/janitor/gpu_reset_plan.cpp \
  || fail "actors/janitor/gpu_reset_plan.cpp no longer runs gpu-reset.sh from the ConfigMap"

namespace=deploy/janitor/namespace.yaml
has_object "$namespace" Namespace "$job_namespace" "" \
  || fail "$namespace: no Namespace $job_namespace"
grep -q '^    pod-security\.kubernetes\.io/enforce: privileged$' "$namespace" \
  || fail "$namespace: Pod Security Admission does not enforce privileged"

has_object deploy/rbac/janitor.yaml ServiceAccount "$reset_service_account" \
  "$job_namespace" \
  || fail "deploy/rbac/janitor.yaml: no ServiceAccount $job_namespace/$reset_service_account"
has_object deploy/rbac/janitor.yaml Role vigil-janitor-jobs "$job_namespace" \
  || fail "deploy/rbac/janitor.yaml: no Role vigil-janitor-jobs in $job_namespace"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "reset_configmap_drift_test: ConfigMap $job_namespace/$reset_script_config_map" \
  "matches gpu-reset.sh; namespace and ServiceAccount $reset_service_account present"
