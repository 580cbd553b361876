#!/usr/bin/env bash
# Runs Azurite's own Table API test suite (GitHub Azure/Azurite, tests/table)
# against a rangetable front end, as an optional compatibility check: it
# needs Azurite's sources and the npm registry, which CI does not reach, so
# it is not part of the test suite (README line 2). See tests/README.md and
# "Azurite's test suite" in frontend/README.md for the expected failures.
#
# Usage: tests/compat/azurite-suite.sh [--src PATH|URL] [--dir DIR]
#            [--ref REF] [--start-cluster] [--grep PATTERN] [TEST.ts ...]
#
#   --src PATH|URL   where to clone Azurite from (default
#                    https://github.com/Azure/Azurite.git; a local mirror
#                    path works too)
#   --dir DIR        the working copy (default ./azurite-suite, kept; an
#                    existing copy is reused and only re-patched)
#   --ref REF        tag or commit to test (default v3.36.0)
#   --start-cluster  start deploy/run-local.sh --port 11002 (data in a
#                    temporary directory, binaries from RT_BUILD_DIR, default
#                    build/dev) for the run and stop it afterwards; without
#                    it a front end must already listen on 127.0.0.1:11002
#                    with the development account (devstoreaccount1)
#   --grep PATTERN   only the tests whose title matches (mocha --grep)
#   TEST.ts ...      test files relative to the Azurite copy (default: every
#                    tests/table/apis/*.test.ts, tests/table/auth/sas.test.ts
#                    and tests/table/auth/tableCorsRequest.test.ts)
#
# What is changed in the Azurite copy (its tests only, reverted and applied
# again on every run): the test server factory returns a no-op server (so
# no Azurite starts and the clients reach whatever listens on 11002), and
# the clients' https:// endpoints become http:// (with the JS SDK allowed
# to use it). Nothing else: every assertion is Azurite's.
#
# Prints each failing test's title and error, then "passing N failing M
# pending K"; mocha's whole output is DIR/rangetable-mocha.out.
# Exit status: 0 when the suite ran (whatever it found), 1 when it could
# not run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SRC=https://github.com/Azure/Azurite.git
DIR=$PWD/azurite-suite
REF=v3.36.0
START=0
GREP=
FILES=()

die() {
    echo "azurite-suite: $*" >&2
    exit 1
}
while (($#)); do
    case "$1" in
    --src) SRC=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --ref) REF=$2; shift 2 ;;
    --start-cluster) START=1; shift ;;
    --grep) GREP=$2; shift 2 ;;
    -h | --help) sed -n '2,35s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) FILES+=("$1"); shift ;;
    esac
done
command -v git >/dev/null || die "git is needed"
command -v npm >/dev/null || die "node and npm are needed"
[[ "$DIR" == /* ]] || DIR=$PWD/$DIR

if [[ ! -d "$DIR/.git" ]]; then
    git clone -q "$SRC" "$DIR" || die "cannot clone $SRC"
fi
cd "$DIR"
# Back to the pristine tests first (a previous run patched them), so a
# second run is the same as the first.
git checkout -q -- tests 2>/dev/null || true
git checkout -q "$REF" || die "no $REF in $DIR"
if [[ ! -d node_modules/mocha ]]; then
    # --ignore-scripts: the VS Code extension's native keytar build needs
    # GitHub, and the table tests never load it.
    npm ci --no-audit --no-fund --ignore-scripts >npm-ci.log 2>&1 ||
        die "npm ci failed (see $DIR/npm-ci.log)"
fi

# 1. The test server factory: a server whose start/close/clean do nothing.
f=tests/table/utils/TableTestServerFactory.ts
grep -q 'return new TableServer(config);' "$f" || die "$f changed: update the patch"
sed -i 's|return new TableServer(config);|void config; return { start: async () => {}, close: async () => {}, clean: async () => {} } as unknown as TableServer;|' "$f"
# 2. The clients: plain HTTP (the no-op server has no certificate to offer).
grep -rl 'https://${HOST}:${PORT}' tests/table | xargs -r sed -i 's|https://${HOST}:${PORT}|http://${HOST}:${PORT}|g'

# 3. The JS SDK refuses plain HTTP with a key or SAS unless each client is
# made with allowInsecureConnection; a mocha --require hook sets it on
# every request the SDK's Node HTTP client sends.
cat >rangetable-http.js <<'JS'
const path = require("path");
const m = require(path.join(process.cwd(),
  "node_modules/@typespec/ts-http-runtime/dist/commonjs/nodeHttpClient.js"));
const proto = Object.getPrototypeOf(m.createNodeHttpClient());
const send = proto.sendRequest;
proto.sendRequest = function (request) {
  request.allowInsecureConnection = true;
  return send.call(this, request);
};
JS

if ((${#FILES[@]} == 0)); then
    FILES=(tests/table/apis/*.test.ts tests/table/auth/sas.test.ts
        tests/table/auth/tableCorsRequest.test.ts)
fi

CLUSTER_PID=
CLUSTER_DATA=
stop_cluster() {
    if [[ -n "$CLUSTER_PID" ]]; then
        # TERM: a background job of a script ignores SIGINT.
        kill -TERM "$CLUSTER_PID" 2>/dev/null || true
        wait "$CLUSTER_PID" 2>/dev/null || true
    fi
    [[ -z "$CLUSTER_DATA" ]] || rm -rf "$CLUSTER_DATA"
}
trap stop_cluster EXIT
if ((START)); then
    CLUSTER_DATA=$(mktemp -d)
    RT_BUILD_DIR=${RT_BUILD_DIR:-$ROOT/build/dev} RT_SKIP_DEPS=1 RT_RESTART=0 \
        "$ROOT/deploy/run-local.sh" --port 11002 --data "$CLUSTER_DATA" \
        --no-build >"$CLUSTER_DATA/run-local.out" 2>&1 &
    CLUSTER_PID=$!
    for _ in $(seq 1 150); do
        grep -q 'rangetable is running' "$CLUSTER_DATA/run-local.out" && break
        kill -0 "$CLUSTER_PID" 2>/dev/null || {
            cat "$CLUSTER_DATA/run-local.out" >&2
            die "the cluster did not start"
        }
        sleep 0.2
    done
fi
timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/11002' 2>/dev/null ||
    die "nothing listens on 127.0.0.1:11002 (start a front end there, or use --start-cluster)"

OUT=$DIR/rangetable-mocha.out
args=(--require ts-node/register --require ./rangetable-http.js --no-timeouts
    --exit)
[[ -z "$GREP" ]] || args+=(--grep "$GREP")
# TS_NODE_TRANSPILE_ONLY: type checking Azurite's sources adds minutes and
# checks nothing about the server. The spec reporter (mocha's JSON reporter
# ends the run early here); Azurite's telemetry library reports on stderr
# that it cannot reach its collector, which is dropped.
NODE_TLS_REJECT_UNAUTHORIZED=0 TS_NODE_TRANSPILE_ONLY=1 \
    npx mocha "${args[@]}" "${FILES[@]}" >"$OUT" 2>/dev/null || true
python3 - "$OUT" <<'PY'
import re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
counts = {}
for l in lines:
    m = re.match(r"^\s+(\d+) (passing|failing|pending)\b", l)
    if m:
        counts[m.group(2)] = int(m.group(1))
if "passing" not in counts:
    sys.exit("azurite-suite: no mocha summary in " + sys.argv[1])
# The failure details after the summary: "  N) suite\n       title:\n     Error"
i = 0
while i < len(lines):
    m = re.match(r"^  (\d+)\) (.*)$", lines[i])
    if m and i + 2 < len(lines) and lines[i + 1].startswith("       "):
        title = lines[i + 1].strip().rstrip(":")
        err = next((x.strip() for x in lines[i + 2:i + 8] if x.strip()), "")
        print("FAIL %s: %s | %s" % (m.group(2), title, err[:200]))
        i += 2
    i += 1
print("passing %d failing %d pending %d" % (counts.get("passing", 0),
      counts.get("failing", 0), counts.get("pending", 0)))
PY
