#!/usr/bin/env bash
# deploy/install.yaml is exactly what `vigil install` prints at its defaults,
# and `--output json` is one v1 List of the same objects.
#   install_drift_test.sh VIGIL
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
vigil=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"$vigil" install > "$work/install.yaml" 2> "$work/stderr" \
  || fail "vigil install failed: $(cat "$work/stderr")"
if ! cmp -s "$work/install.yaml" "$root/deploy/install.yaml"; then
  diff -u "$root/deploy/install.yaml" "$work/install.yaml" | head -40 >&2 || true
  fail "deploy/install.yaml differs from \`vigil install\`: run scripts/render-manifests"
fi
"$vigil" install --output json > "$work/install.json"
documents=$(grep -c '^---$' "$work/install.yaml")
items=$(grep -c '^    {$' "$work/install.json")
[ "$items" -eq $((documents + 1)) ] \
  || fail "--output json has $items items, the YAML $((documents + 1)) documents"

# An unknown key stops it with the key's path.
printf 'control:\n  listne: 0.0.0.0:1\n' > "$work/bad.yaml"
if "$vigil" install --config "$work/bad.yaml" > /dev/null 2> "$work/stderr"; then
  fail "an unknown key was accepted"
fi
grep -q "control.listne" "$work/stderr" || fail "the error does not name control.listne: $(cat "$work/stderr")"
echo "ok"
