# integration tests (pytest against real processes)
#
# Included from tests/CMakeLists.txt, so paths are relative to this file
# (CMAKE_CURRENT_LIST_DIR), not to tests/. Each test_*.py listed here is one
# ctest test, label "integration", run with Debian's /usr/bin/python3 (which
# has python3-azure and python3-pytest) against the binaries of this build
# tree: the harness (rtcluster.py) reads RT_BUILD_DIR.
#
#   ctest --test-dir build/sanitize -L integration --output-on-failure
#
# pytest's temp directories (each daemon's data dir and stdout/stderr) go
# under <build>/tests/tmp-<test>/, kept until the next run of that test.

set(RT_INTEGRATION_PYTHON /usr/bin/python3 CACHE FILEPATH
    "Python with azure-data-tables and pytest, for integration tests")

# One ctest test per file. What each covers:
#   test_masters_list   a partition server and a front end given
#                       --master FOLLOWER,LEADER (a fake follower
#                       answering RT_ENOTLEADER) end at the leader
#   test_skeleton       SDK round trip, restart survival, rtctl (also
#                       given a list: dead, no-leader and 307 masters)
#   test_recovery       partition server / master restarts; a truncated
#                       data.mdb refused at start (exit 2); a value
#                       changed on disk is 500, not data
#   test_crash          SIGKILL mid-stream: no acknowledged write lost
#   test_fe_api         addressing, versions, \$filter routing, accounts
#   test_batch          entity group transactions (\$batch)
#   test_sdk_python     the official Python SDK, every operation and type
#   test_key_order      keys in UTF-16 code-unit order (emoji before
#                       U+E000..U+FFFF): lists, filters, pages of one, a
#                       split at such keys across two servers, key format
#                       1 directories migrated by the servers at start
#   test_sdk_js         the official JavaScript SDK (npm-installed into
#                       <build>/js at test time; skipped if npm is offline)
#   test_raw_http       headers, status codes and bodies the SDKs hide
#   test_atom           AtomPub (x-ms-version < 2015-12-11) over raw HTTP:
#                       tables, entities, every EDM type, feeds, errors,
#                       \$batch, hostile XML
#   test_sas_acl_cors   SAS, table ACLs, service properties, CORS, grace
#   test_azurite_compat what Azurite's own suite (tests/compat) found:
#                       trailing slash, boolean filter terms, re-create at
#                       once with no grace (old data never shows), weak
#                       ETags, typed nulls, DateTime/Double range, Vary,
#                       service stats on the secondary only, $top=0
#   test_malformed      a few hundred bad requests (seeded): each gets a
#                       complete 4xx with x-ms-error-code; nothing written
#   test_balance        load balancing: policy split/move of a hot range,
#                       the policy's split of a hot RF-3 range, rtctl
#                       split/move/merge/drain under load, SIGKILL
#                       mid-move, master restarts, a stale front end
#   test_policy_crdb    --policy crdb: a hot range split by load and
#                       spread by the store rebalancer until the servers
#                       serve alike (moves at RF 1, primary-role
#                       transfers at RF 3); a bad --policy-opt exits 2
#   test_replication    RF 3 on 3 servers: every kind of write reaches all
#                       three copies (rt-inspect digests and LSNs), rtctl
#                       shows replicas and ISR; SIGKILL of the primary and
#                       of a secondary mid-stream (the ISR shrinks, writes
#                       go on on the copies left), two primaries killed in
#                       turn (the last copy serves reads, refuses writes);
#                       splits under load (halves keep the replica set and
#                       LSNs, then fail over one by one);
#                       xfail when a restarted primary is ahead (no
#                       catch-up yet)
#   test_transfer       RF 3: rtctl transfer of a primary to a secondary
#                       and back under SDK writes (ServerBusy window
#                       printed), no acknowledged write lost, the copies
#                       identical; bad transfers refused 4xx
#   test_move_repl      RF 3 on 4 servers: rtctl move of a range from its
#                       primary's server to the fourth under SDK writes
#                       (learner, join, transfer, removal), the copies
#                       identical; bad moves refused 4xx; a drain moves
#                       every copy off its server
#   test_repl_hostile   garbage, truncated and absurd frames on every
#                       replication RPC method of every server and the
#                       master: nobody dies, the table stays intact
#   test_repair         bytes flipped in a running server's data.mdb: a
#                       get at the primary answers from a peer's copy and
#                       repairs, a query gets 503 then the right page, the
#                       scrub repairs a secondary, RF 1 answers 500
#   test_master_ha      three masters (one Raft group): status lists them,
#                       followers redirect, kill -9 of the leader under
#                       writes (new leader, no lost write, creation works),
#                       two of three down (data path serves, creation 503)
#   test_https          HTTPS next to HTTP (SDK over https://, URLs in
#                       responses, SAS spr=https, TLS 1.2+ only, plain
#                       HTTP on the TLS port); SIGHUP: certificate
#                       rotation (open connections go on, a bad pair is
#                       ignored), accounts file reload (add, remove,
#                       key2 rotation with no failed request, bad or
#                       world-readable file ignored); no secret logged
#   test_deploy         every example config passes --check-config; the
#                       install tree and its systemd units (systemd-analyze
#                       verify); deploy/examples/cluster on loopback with
#                       names: READY=1/STOPPING=1 on a test \$NOTIFY_SOCKET,
#                       advertised names in the masters list, the SDK
#                       through both front ends; rtctl handover, then a
#                       partition server restarted under writes: only 2xx
#                       and retried 503s
#   test_backup         tools/rt-backup: a table of every EDM type, unicode
#                       keys, 1,250 entities (paging, transactions of 100)
#                       backed up and restored (new name, after a drop):
#                       identical; create mode does not overwrite; a
#                       tampered backup is refused; the whole-cluster
#                       files (mdb_copy live, restore = stop, put back,
#                       start) give back exactly the backup
#   test_hostile        the front end against hostile clients: 2,500 slow
#                       connections (a normal SDK client still served, the
#                       oldest shed for the reserve, all closed by the
#                       header bound), body and idle bounds, the
#                       per-address cap, request smuggling (400, closed,
#                       the smuggled request never runs), requests in
#                       flight per account (503 ServerBusy)
#   test_multihost      nine hosts from network namespaces (3 masters, 3
#                       partition servers, 2 front ends, a client) run
#                       from the example configs; SDK load through both
#                       front ends, the link of the primary's server and
#                       then of the master leader cut: writes go on, no
#                       acknowledged write lost (skipped unless root)
#   test_metrics        every daemon's /metrics parses (prometheus_client);
#                       the front end's counters and histograms move by
#                       exactly the SDK requests made (account, operation,
#                       status); replication lag and lease on the PSs;
#                       under-replicated ranges after a kill; promtool on
#                       deploy/prometheus/*.yml, the rules' metrics exist
#   test_admin_auth     the master's HTTP API behind its admin token: 401 /
#                       403 / 200, a cross-site form POST changes nothing,
#                       no CORS, --status-open, SIGHUP rotation, bad token
#                       files refused at start, rtctl, followers, the
#                       dashboard in headless chromium (skipped without)
#   test_rpc_auth       the cluster RPC's mutual TLS: raw clients without
#                       credentials or with another CA's certificate are
#                       closed (DELETE_TABLE, entity read and write change
#                       nothing); a wrong role gets RT_EPERM; a partition
#                       server certificate cannot take a live server's id
#   test_master_raft_tls three masters with --cluster-tls: raft over mutual
#                       TLS elects, commits, survives kill -9 of the
#                       leader; plain TCP, no cert, a ps: cert, another
#                       CA's cert on a raft port: closed, term unchanged;
#                       a transfer re-executes the old leader over TLS
#   test_keyviz         GET /api/history?res=10 (10 s frames, means of the
#                       1 s ones); the dashboard's Key Visualizer in
#                       headless chromium (skipped without): zoom, range
#                       and server drill-down, split markers, a keyviz.json
#                       opened from a file
#   test_trace          load trace: --trace records a policy split (header,
#                       map = /api/status, loads with samples, decision
#                       key = split event, ticks); rtctl trace start/stop,
#                       names not paths, 401 without the token
#   test_fe_idle_memory idle keep-alive connections give their
#                       libmicrohttpd pool's zeroed pages back and still
#                       serve; bytes of an unfinished request line survive
#   test_fe_listen      a listening socket per worker (SO_REUSEPORT): a
#                       burst of connections waits on both, each is
#                       served; a second front end on the port is refused
#   test_sim            rt-sim: a recorded trace validates (its splits at
#                       the same keys within a tick), replays and synthetic
#                       runs are deterministic, compare writes its files
set(RT_INTEGRATION_TESTS
  test_skeleton
  test_recovery
  test_crash
  test_fe_api
  test_batch
  test_sdk_python
  test_key_order
  test_sdk_js
  test_raw_http
  test_atom
  test_sas_acl_cors
  test_malformed
  test_balance
  test_policy_crdb
  test_replication
  test_transfer
  test_move_repl
  test_repl_hostile
  test_repair
  test_masters_list
  test_master_ha
  test_https
  test_deploy
  test_backup
  test_hostile
  test_multihost
  test_metrics
  test_admin_auth
  test_rpc_auth
  test_master_raft_tls
  test_trace
  test_sim
  test_disk_full
  test_azurite_compat
  test_keyviz
  test_fe_idle_memory
  test_fe_listen
)

function(rt_integration_test t)
  set(tmp ${CMAKE_CURRENT_BINARY_DIR}/tmp-${t})
  add_test(NAME integration_${t}
    COMMAND ${RT_INTEGRATION_PYTHON} -m pytest -v -ra
            -p no:cacheprovider --basetemp=${tmp}
            ${CMAKE_CURRENT_LIST_DIR}/${t}.py
    WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(integration_${t} PROPERTIES
    LABELS integration
    TIMEOUT 600
    ENVIRONMENT "RT_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1;NO_PROXY=127.0.0.1,localhost"
    # The binaries are part of "all"; this keeps ctest -j from running
    # integration tests side by side on a 2-core machine.
    RESOURCE_LOCK rt_integration)
endfunction()

foreach(t ${RT_INTEGRATION_TESTS})
  rt_integration_test(${t})
endforeach()

# rt-load against a real cluster (rtcluster.py): a 3-second run, 0 errors.
add_test(NAME integration_rt_load_smoke
  COMMAND ${RT_INTEGRATION_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/rt_load_smoke.py
          --rt-load $<TARGET_FILE:rt-load>
          --workdir ${CMAKE_CURRENT_BINARY_DIR}/tmp-rt-load-smoke)
set_tests_properties(integration_rt_load_smoke PROPERTIES
  LABELS integration
  TIMEOUT 180
  ENVIRONMENT "RT_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1;NO_PROXY=127.0.0.1,localhost"
  RESOURCE_LOCK rt_integration)

# netns.py's self-test: two namespaces on a bridge, a connection between
# them, a cut link, nothing left behind (prints "skip" unless root).
add_test(NAME integration_netns_selftest
  COMMAND ${RT_INTEGRATION_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/netns.py)
set_tests_properties(integration_netns_selftest PROPERTIES
  LABELS integration
  TIMEOUT 60
  RESOURCE_LOCK rt_integration)
