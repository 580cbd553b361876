#!/usr/bin/env bash
# Runs the @azure/data-tables tests by hand against a running cluster.
#
#   tests/integration/js/run.sh DEST [node --test args...]
#
# Copies package.json and the *.mjs files to DEST (a directory in the build
# tree, e.g. build/sanitize/js), installs the SDK there with npm (never in
# the source tree), and runs `node --test` on every *.test.mjs. The cluster
# comes from RT_TABLE_ENDPOINT, RT_ACCOUNT, RT_KEY and RT_CONNECTION_STRING
# (test_sdk_js.py sets them; it is what ctest runs).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest=${1:?usage: run.sh DEST [node --test args...]}
shift
mkdir -p "$dest"
cp "$src"/package.json "$src"/*.mjs "$dest"/
npm install --no-audit --no-fund --prefix "$dest" >&2
cd "$dest"
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
exec node --test --test-reporter=spec "$@" ./*.test.mjs
