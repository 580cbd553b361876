"""The official JavaScript SDK (@azure/data-tables, Node >= 20) against a
real cluster: runs the node:test files of tests/integration/js/ with
`node --test`, pointing them at this module's cluster through RT_*
environment variables, and passes when node exits 0.

The SDK is installed at test time into the build tree, never into the
source tree: package.json and the test files are copied to <build>/js and
`npm install --no-audit --no-fund --prefix <build>/js` runs there (about a
second when already installed). If npm cannot reach its registry and the
SDK is not installed yet, the test is skipped with the reason; a missing
node/npm also skips. Anything else that goes wrong fails.

By hand, with a cluster already running:
    RT_TABLE_ENDPOINT=http://127.0.0.1:PORT/devstoreaccount1 RT_ACCOUNT=..
    RT_KEY=.. RT_CONNECTION_STRING=.. tests/integration/js/run.sh BUILD/js
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

JS_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
NPM_TIMEOUT = 180
NODE_TIMEOUT = 300
MIN_JS_TESTS = 30
# npm's words for "the registry is not reachable from here".
NETWORK_ERRORS = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|"
    r"EHOSTUNREACH|network|socket hang up|proxy|E407|E403 .*registry|"
    r"request to https?://\S+ failed", re.IGNORECASE)


def _node_major():
    try:
        out = subprocess.run(["node", "--version"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.match(r"v(\d+)\.", out)
    return int(m.group(1)) if m else None


def stage_js(build_dir):
    """Copies package.json and the test files to <build>/js and installs
    the SDK there. Returns the directory, or calls pytest.skip."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed (deploy/install-deps.sh --test "
                    "installs nodejs and npm)")
    major = _node_major()
    if major is None or major < 20:
        pytest.skip("@azure/data-tables needs Node >= 20, found %r" % major)
    dest = os.path.join(build_dir, "js")
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(JS_SRC):
        if name == "package.json" or name.endswith(".mjs") or \
                name.endswith(".sh"):
            shutil.copy2(os.path.join(JS_SRC, name),
                         os.path.join(dest, name))
    installed = os.path.exists(os.path.join(
        dest, "node_modules", "@azure", "data-tables", "package.json"))
    cmd = ["npm", "install", "--no-audit", "--no-fund", "--no-update-notifier",
           "--fetch-retries=1", "--fetch-timeout=30000", "--prefix", dest]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=NPM_TIMEOUT, cwd=dest)
        rc, out = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = -1, "npm install timed out after %ss\n%s" % (
            NPM_TIMEOUT, e.stdout or "")
    sys.stdout.write("$ %s\n%s\n" % (" ".join(cmd), out))
    if rc != 0:
        if installed:
            # An earlier install is there; use it rather than fail offline.
            sys.stdout.write("npm install failed; using the SDK already "
                             "installed in %s\n" % dest)
        elif rc == -1 or NETWORK_ERRORS.search(out):
            why = [ln for ln in out.splitlines()
                   if NETWORK_ERRORS.search(ln)][:3]
            pytest.skip("npm cannot reach its registry, so @azure/data-tables "
                        "cannot be installed (%s)" % " / ".join(
                            ln.strip() for ln in why))
        else:
            pytest.fail("npm install failed (exit %d):\n%s" % (rc, out))
    return dest


def test_js_sdk(cluster):
    """Every js/*.test.mjs passes against the cluster (node --test exit 0),
    and there are at least MIN_JS_TESTS of them."""
    dest = stage_js(cluster.build_dir)
    files = sorted(f for f in os.listdir(dest) if f.endswith(".test.mjs"))
    assert files, "no *.test.mjs in %s" % dest
    env = dict(os.environ)
    env.update({
        "RT_TABLE_ENDPOINT": cluster.table_endpoint,
        "RT_ACCOUNT": cluster.account,
        "RT_KEY": cluster.key,
        "RT_CONNECTION_STRING": cluster.connection_string,
        # core-rest-pipeline honours HTTP(S)_PROXY; the cluster is local.
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    })
    cmd = ["node", "--test", "--test-reporter=spec"] + files
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=dest,
                           env=env, timeout=NODE_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail("node --test timed out after %ss:\n%s" % (
            NODE_TIMEOUT, e.stdout or ""))
    out = r.stdout + r.stderr
    sys.stdout.write("$ (cd %s && %s)\n%s\n" % (dest, " ".join(cmd), out))
    counts = dict((k, int(v)) for k, v in re.findall(
        r"^\S*\s*(tests|pass|fail|skipped|todo|cancelled) (\d+)\s*$", out,
        re.MULTILINE))
    assert r.returncode == 0, "node --test exit %d (%s); output above" % (
        r.returncode, counts)
    assert counts.get("tests", 0) >= MIN_JS_TESTS, counts
    assert counts.get("fail", 0) == 0, counts
