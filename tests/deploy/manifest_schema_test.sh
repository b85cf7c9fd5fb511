#!/usr/bin/env bash
# Every object `vigil install` prints, at the defaults and with a separate
# janitor, is valid against the OpenAPI schema of its kind (kubernetes-models
# 4.5.1: Kubernetes 1.32's schemas; the Prometheus Operator's for ServiceMonitor
# and PrometheusRule). scripts/install-test-tools installs them; exit 77
# (skipped) where node or the packages are missing.
#   manifest_schema_test.sh VIGIL
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
vigil=$1
schemas=$root/tests/deploy/manifest-schemas
if ! command -v node >/dev/null || [ ! -d "$schemas/node_modules/kubernetes-models" ]; then
  echo "SKIP: node or kubernetes-models missing (scripts/install-test-tools)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$vigil" install --output json > "$work/defaults.json"
node "$schemas/validate.js" "$work/defaults.json"
printf 'janitor:\n  in_process: false\njournal:\n  url: postgresql://vigil@db:5432/vigil\n' \
  > "$work/janitor.yaml"
"$vigil" install --config "$work/janitor.yaml" --namespace ops --output json \
  > "$work/janitor.json"
node "$schemas/validate.js" "$work/janitor.json"
