"""pytest glue for the integration tests: the `cluster` fixture and a report
section with the cluster's log directory and stderr tails on failure.

Run through ctest (label `integration`), or by hand:
    RT_BUILD_DIR=build/sanitize /usr/bin/python3 -m pytest -v tests/integration
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The SDK (requests) honours http_proxy; the cluster is on loopback.
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

from rtcluster import Cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A started cluster (master, 3 partition servers, front end) shared by
    the tests of one module. Teardown stops it by PID and fails on any
    sanitizer report in the daemons' stderr."""
    c = Cluster(tmp_path_factory.mktemp("cluster"), n_ps=3)
    sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
    c.start()
    yield c
    c.stop(check=False)
    c.check_sanitizers()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    c = getattr(item, "funcargs", {}).get("cluster")
    if c is None:
        return
    try:
        text = "logs in %s\n%s" % (c.logdir, c.describe(15))
    except Exception as e:  # noqa: BLE001 - reporting must not fail
        text = "logs in %s (describe failed: %r)" % (c.logdir, e)
    rep.sections.append(("rangetable cluster", text))
