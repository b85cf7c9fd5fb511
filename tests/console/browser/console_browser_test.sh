#!/usr/bin/env bash
# Runs the console's browser test (console_browser_test.mjs); exits 77 (CTest
# skip) when Debian's chromium or the npm packages are not installed, as on
# a machine where scripts/install-test-tools has not run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=${1:?usage: console_browser_test.sh VIGIL_BINARY}
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "skipped: no chromium (scripts/install-test-tools installs it)"
  exit 77
fi
if [ ! -d "$here/node_modules/puppeteer-core" ]; then
  echo "skipped: no puppeteer-core (scripts/install-test-tools runs npm ci here)"
  exit 77
fi
exec node "$here/console_browser_test.mjs" "$binary"
