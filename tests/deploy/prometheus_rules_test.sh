#!/usr/bin/env bash
# runtime/install/assets/vigil-rules.yaml under promtool: `promtool check rules` and
# `promtool test rules` (vigil-rules.test.yaml, vigil-rules-weekly.test.yaml
# here: each alert fires, and does not, on series shaped as the janitor
# exports them). promtool reads plain rule files, not PrometheusRule objects:
# the object's spec.groups is extracted first. Exit 77 (skipped) only when
# promtool is missing; scripts/install-deps installs it (Debian's prometheus).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rules=$root/runtime/install/assets/vigil-rules.yaml

if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool not found (Debian package prometheus, see scripts/install-deps): skipped"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# spec.groups of the PrometheusRule, one indentation level out: the lines
# after `spec:` up to the next top-level key. Anything in spec but groups is
# an error, so that nothing is checked by halves.
awk '
  /^spec:[[:space:]]*$/ { in_spec = 1; next }
  in_spec && /^[^[:space:]#]/ { exit }
  in_spec { sub(/^  /, ""); print }
' "$rules" >"$work/vigil-rules.rules.yaml"
if ! grep -q '^groups:' "$work/vigil-rules.rules.yaml" \
  || grep -v '^groups:' "$work/vigil-rules.rules.yaml" | grep -q '^[^[:space:]#]'; then
  echo "$rules: spec must hold groups and nothing else" >&2
  exit 1
fi
grep -q '^kind: PrometheusRule$' "$rules" || {
  echo "$rules: not a PrometheusRule" >&2
  exit 1
}

promtool check rules "$work/vigil-rules.rules.yaml"
cp "$root"/tests/deploy/vigil-rules*.test.yaml "$work/"
cd "$work"
promtool test rules vigil-rules.test.yaml vigil-rules-weekly.test.yaml
