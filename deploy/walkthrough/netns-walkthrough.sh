#!/usr/bin/env bash
# Follows docs/DEPLOY.md once, from scratch, on fresh "hosts" made of Linux
# network namespaces, and times each step (how the guide was checked).
#
#   sudo deploy/walkthrough/netns-walkthrough.sh [BUILD_DIR]   (default build/release)
#
# Contract:
#  - Needs root, iproute2, util-linux (unshare, nsenter, setpriv), overlayfs, nft,
#    /usr/bin/python3 with azure.data.tables, mdb_copy. A Release build in
#    BUILD_DIR (cmake --build done; this script runs `cmake --install`).
#  - Hosts: rt-m1..3, rt-ps1..3, rt-fe1..2 at the addresses of
#    deploy/examples/cluster/hosts.example, and "admin" (10.0.9.5: the admin,
#    client and monitoring host), one namespace each ("rtw-HOST"), joined by
#    a bridge in its own namespace ("rtw-sw"). No address, route or bridge is
#    made in the caller's namespace.
#  - Each host has its own /etc, /var, /usr/local and /root: overlays (upper
#    layers under WORK) in a mount namespace held by one `sleep` per host;
#    every command of that host runs in it (nsenter). So the guide's paths
#    (/etc/rangetable, /var/lib/rangetable, /usr/local/bin, the user made by
#    systemd-sysusers) are used as written, and the machine's own /etc,
#    /var and /usr/local are never written.
#  - systemd is not PID 1 here: "systemctl start UNIT" runs the installed
#    unit's ExecStart= as its User= (setpriv) with its UMask=, after
#    `systemd-analyze verify` of the unit, and returns on the daemon's READY=1
#    to a $NOTIFY_SOCKET this script binds (Type=notify).
#  - Where it departs from the guide, only because these hosts share the
#    machine's /: backups go to /var/backups/rt (files) and /root/backup
#    (rt-backup) instead of /backup; "scp" is a copy between the hosts'
#    overlay layers; the client dials rt-fe1/rt-fe2.internal:10443 directly
#    (no load balancer; taking a front end "out of the pool" means the
#    writer skips it) with the self-signed HTTPS certificate as its CA.
#  - Every process is started by this script and stopped by its PID; on exit
#    (also on error or Ctrl-C) the daemons, the holders and the namespaces
#    are removed. WORK (default /tmp/rt-walk) keeps logs and timings.tsv.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$REPO/build/release}
WORK=${RT_WALK_DIR:-/tmp/rt-walk}
PY=/usr/bin/python3
HOSTS="rt-m1 rt-m2 rt-m3 rt-ps1 rt-ps2 rt-ps3 rt-fe1 rt-fe2 admin"
declare -A ADDR=([rt-m1]=10.0.1.11 [rt-m2]=10.0.1.12 [rt-m3]=10.0.1.13
    [rt-ps1]=10.0.2.21 [rt-ps2]=10.0.2.22 [rt-ps3]=10.0.2.23
    [rt-fe1]=10.0.3.31 [rt-fe2]=10.0.3.32 [admin]=10.0.9.5)
declare -A HOLD=()   # host -> PID of the process holding its mount namespace
declare -A DPID=()   # host -> PID of its daemon
declare -A NPID=()   # host -> PID of the listener for its READY=1
NSS=()

[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 2; }
for ns in $(ip netns list | awk '{print $1}'); do
    case $ns in rtw-*) echo "namespace $ns exists: another walkthrough runs" >&2; exit 2 ;; esac
done

cleanup() {
    set +e
    for h in "${!DPID[@]}"; do kill -TERM "${DPID[$h]}" 2>/dev/null; done
    sleep 1
    for h in "${!DPID[@]}"; do kill -KILL "${DPID[$h]}" 2>/dev/null; done
    [ -n "${WRITER:-}" ] && kill -KILL "$WRITER" 2>/dev/null
    for h in "${!NPID[@]}"; do kill -KILL "${NPID[$h]}" 2>/dev/null; done
    for h in "${!HOLD[@]}"; do kill -KILL "${HOLD[$h]}" 2>/dev/null; done
    wait 2>/dev/null
    for ns in "${NSS[@]}"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$WORK"
mkdir -p "$WORK/logs"
TIMINGS=$WORK/timings.tsv
: >"$TIMINGS"
T0=0
step() { T0=$(date +%s.%N); echo "== $*"; STEP="$*"; }
done_step() {
    local t
    t=$(echo "$(date +%s.%N) - $T0" | bc)
    printf '%s\t%.2f s\t%s\n' "$STEP" "$t" "${1:-}" | tee -a "$TIMINGS"
}

# on HOST CMD...: CMD in HOST's network and mount namespaces, as root.
on() { local h=$1; shift; nsenter -t "${HOLD[$h]}" -m -n -- "$@"; }
# as HOST CMD...: the same as the units' User=rangetable with UMask=0027.
as() {
    local h=$1; shift
    on "$h" setpriv --reuid rangetable --regid rangetable --init-groups \
        sh -c 'umask 0027; exec "$@"' sh "$@"
}
# unit_exec HOST UNIT INSTANCE EXTRA: the installed unit's ExecStart= line.
unit_exec() {
    local line
    line=$(on "$1" sed -n 's/^ExecStart=//p' "/usr/local/lib/systemd/system/$2")
    line=${line//%i/$3}
    echo "${line//\$RT_MASTER_ARGS/$4}"
}
# start HOST UNIT INSTANCE [EXTRA]: "systemctl start UNIT" by hand; the
# units are Type=notify, so a listener on the daemon's $NOTIFY_SOCKET
# stands in for systemd and `ready HOST...` returns when "systemctl start"
# would (READY=1).
start() {
    local h=$1 cmd sock=$WORK/notify/$1.sock
    cmd=$(unit_exec "$1" "$2" "${3:-}" "${4:-}")
    mkdir -p "$WORK/notify"
    rm -f "$sock"
    "$PY" -c 'import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.settimeout(120)
print("bound", flush=True)
while b"READY=1" not in s.recv(4096).split(b"\n"):
    pass' "$sock" >"$WORK/notify/$h.out" 2>&1 &
    NPID[$h]=$!
    wait_for 10 grep -q bound "$WORK/notify/$h.out"
    # exec: $! must be the daemon's PID (a backgrounded function would be
    # a subshell whose death leaves the daemon running).
    # shellcheck disable=SC2086
    (exec nsenter -t "${HOLD[$h]}" -m -n -- env NOTIFY_SOCKET="$sock" \
        setpriv --reuid rangetable \
        --regid rangetable --init-groups sh -c 'umask 0027; exec "$@"' sh \
        $cmd) >>"$WORK/logs/$h.log" 2>&1 &
    DPID[$h]=$!
}
# ready HOST...: until each one's READY=1 (TimeoutStartSec=120).
ready() {
    local h
    for h in "$@"; do
        wait "${NPID[$h]}" || { echo "$h: no READY=1" >&2; return 1; }
    done
}
# stop HOST: "systemctl stop" (SIGTERM, wait).
stop() {
    local h=$1 rc=0
    kill -TERM "${DPID[$h]}"
    wait "${DPID[$h]}" || rc=$?
    unset "DPID[$h]"
    [ "$rc" = 0 ] || echo "   $h exited $rc" >&2
}
admin() {
    on admin env RT_MASTER_HTTP=rt-m1.internal:10101,rt-m2.internal:10101,rt-m3.internal:10101 \
        RT_ADMIN_TOKEN_FILE=/root/rt-credentials/admin.token "$@"
}
status_json() { admin rtctl status --json 2>/dev/null; }
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds
    local end=$(($(date +%s) + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || { echo "timed out: $*" >&2; return 1; }
        sleep 0.1
    done
}
jq_status() { status_json | jq -e "$1"; }

# ---- the hosts ----
step "fresh hosts: 9 namespaces, bridge, overlays"
ip netns add rtw-sw; NSS+=(rtw-sw)
ip -n rtw-sw link add br0 type bridge
ip -n rtw-sw link set br0 up
for h in $HOSTS; do
    ns=rtw-$h
    ip netns add "$ns"; NSS+=("$ns")
    ip -n "$ns" link set lo up
    ip -n rtw-sw link add "w-$h" type veth peer name eth0 netns "$ns"
    ip -n rtw-sw link set "w-$h" master br0 up
    ip -n "$ns" addr add "${ADDR[$h]}/16" dev eth0
    ip -n "$ns" link set eth0 up
    mounts=""
    for d in etc var usr/local root; do
        u=$WORK/hosts/$h/${d//\//_}
        mkdir -p "$u.up" "$u.wk"
        mounts="$mounts mount -t overlay overlay -o lowerdir=/$d,upperdir=$u.up,workdir=$u.wk /$d &&"
    done
    ip netns exec "$ns" unshare --mount --propagation private \
        sh -c "$mounts exec sleep infinity" &
    HOLD[$h]=$!
done
for h in $HOSTS; do
    wait_for 10 on "$h" sh -c 'mountpoint -q /root'
done
done_step

# ---- 2. install ----
step "2. DESTDIR=... cmake --install, tarball, untar into /usr/local on each host"
DESTDIR=$WORK/stage cmake --install "$BUILD" --prefix /usr/local >"$WORK/logs/install.log"
tar -C "$WORK/stage/usr/local" -czf "$WORK/rt.tgz" .
for h in $HOSTS; do on "$h" tar -C /usr/local -xzf "$WORK/rt.tgz"; done
done_step

step "1. /etc/hosts block from hosts.example on each host"
for h in $HOSTS; do
    on "$h" sh -c 'cat /usr/local/share/doc/rangetable/examples/cluster/hosts.example >> /etc/hosts'
done
done_step


# ---- 3. user and directories ----
step "3. user and directories (every host)"
for h in $HOSTS; do
    on "$h" systemd-sysusers /usr/local/lib/sysusers.d/rangetable.conf
    on "$h" install -d -o root -g root -m 0755 /etc/rangetable
    # StateDirectory=rangetable, StateDirectoryMode=0750
    on "$h" install -d -o rangetable -g rangetable -m 0750 /var/lib/rangetable
done
for n in 1 2 3; do on "rt-ps$n" install -d -o rangetable -g rangetable -m 0750 "/var/lib/rangetable/ps$n"; done
done_step
step "systemd-analyze verify of the installed units (on rt-m1)"
note=""
on rt-m1 install -d /root/units
for u in rt-master.service rt-partition-server@ps1.service rt-frontend@fe1.service; do
    on rt-m1 cp "/usr/local/lib/systemd/system/${u/@*./@.}" "/root/units/$u"
    if ! out=$(on rt-m1 systemd-analyze verify "/root/units/$u" 2>&1); then
        note="$note $u: $(echo "$out" | head -2 | tr '\n' ' ')"
    fi
done
done_step "${note:-clean}"

# ---- 4. credentials ----
step "4. credentials on the admin host (rtctl cluster init, token, accounts, HTTPS cert)"
on admin rtctl cluster init /root/rt-credentials --masters m1,m2,m3 \
    --partition-servers ps1,ps2,ps3 --frontends fe1,fe2 >"$WORK/logs/init.log"
on admin sh -c '(umask 077; openssl rand -hex 32 > /root/rt-credentials/admin.token)'
on admin sh -c 'umask 077; printf "myaccount %s\n" "$(head -c 64 /dev/urandom | base64 -w0)" > /root/rt-credentials/accounts'
on admin sh -c 'cd /root/rt-credentials && mkdir -p fe-tls && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=tables.example.com -addext "subjectAltName=DNS:tables.example.com,DNS:rt-fe1.internal,DNS:rt-fe2.internal" -keyout fe-tls/key.pem -out fe-tls/cert.pem 2>/dev/null'
done_step

# ---- 5. per-host files ----
CRED=$WORK/hosts/admin/root.up/rt-credentials   # what scp from the admin host reads
EX=/usr/local/share/doc/rangetable/examples/cluster
tls_install() { # tls_install HOST NODE
    on "$1" install -d -o root -g rangetable -m 0750 /etc/rangetable/tls
    on "$1" install -o root -g rangetable -m 0644 "$CRED/$2/ca.crt" "$CRED/$2/node.crt" /etc/rangetable/tls/
    on "$1" install -o rangetable -g rangetable -m 0600 "$CRED/$2/node.key" /etc/rangetable/tls/
}
step "5. per-host files and --check-config"
for n in 1 2 3; do
    h=rt-m$n
    on "$h" install -o root -g rangetable -m 0640 "$EX/m$n.conf" /etc/rangetable/master.conf
    tls_install "$h" "m$n"
    on "$h" install -o rangetable -g rangetable -m 0600 "$CRED/admin.token" /etc/rangetable/admin.token
    h=rt-ps$n
    on "$h" install -o root -g rangetable -m 0640 "$EX/ps$n.conf" "/etc/rangetable/ps$n.conf"
    tls_install "$h" "ps$n"
done
for n in 1 2; do
    h=rt-fe$n
    on "$h" install -o root -g rangetable -m 0640 "$EX/fe$n.conf" "/etc/rangetable/fe$n.conf"
    tls_install "$h" "fe$n"
    on "$h" install -o rangetable -g rangetable -m 0600 "$CRED/accounts" /etc/rangetable/accounts
    on "$h" install -d -o root -g rangetable -m 0750 /etc/rangetable/fe-tls
    on "$h" install -o root -g rangetable -m 0644 "$CRED/fe-tls/cert.pem" /etc/rangetable/fe-tls/
    on "$h" install -o rangetable -g rangetable -m 0600 "$CRED/fe-tls/key.pem" /etc/rangetable/fe-tls/
done
for n in 1 2 3; do
    as "rt-m$n" rt-master --config /etc/rangetable/master.conf --check-config
    as "rt-ps$n" rt-partition-server --config "/etc/rangetable/ps$n.conf" --check-config
done
for n in 1 2; do as "rt-fe$n" rt-frontend --config "/etc/rangetable/fe$n.conf" --check-config; done
done_step

# ---- 1. firewall (nftables, each host its own) ----
step "1. firewall: default drop, the ports of the Firewall table (nft, every host)"
fw() { # fw HOST RULE...: the guide's base chain, then HOST's rules
    local h=$1; shift
    on "$h" nft add table inet filter
    on "$h" nft add chain inet filter input '{ type filter hook input priority 0; policy drop; }'
    on "$h" nft add rule inet filter input ct state established,related accept
    on "$h" nft add rule inet filter input iif lo accept
    local r
    for r in "$@"; do
        # shellcheck disable=SC2086
        on "$h" nft add rule inet filter input $r accept
    done
}
NETS="{ 10.0.1.0/24, 10.0.2.0/24, 10.0.3.0/24 }"
for n in 1 2 3; do
    fw "rt-m$n" "ip saddr { 10.0.1.0/24, 10.0.2.0/24, 10.0.3.0/24, 10.0.9.5 } tcp dport 10100" \
        "ip saddr 10.0.9.5 tcp dport 10101" "ip saddr 10.0.1.0/24 tcp dport 10102"
    fw "rt-ps$n" "ip saddr $NETS tcp dport 10200" "ip saddr 10.0.9.5 tcp dport 10201"
done
for n in 1 2; do
    fw "rt-fe$n" "ip saddr 10.0.9.5 tcp dport 10443" "ip saddr 10.0.9.5 tcp dport 10003"
done
fw admin
done_step

# ---- 6. masters ----
step "6. 3 masters started with --bootstrap until rtctl status shows a leader"
for n in 1 2 3; do start "rt-m$n" rt-master.service "" --bootstrap; done
ready rt-m1 rt-m2 rt-m3
wait_for 60 jq_status '[.masters[] | select(.leader == true)] | length == 1'
done_step
admin rtctl status >"$WORK/logs/status-masters.txt" 2>&1 || true

# ---- 7. partition servers, front ends ----
step "7a. 3 partition servers until all up"
for n in 1 2 3; do start "rt-ps$n" rt-partition-server@.service "ps$n"; done
ready rt-ps1 rt-ps2 rt-ps3
wait_for 60 jq_status '[.servers[] | select(.state == "up")] | length == 3'
done_step
# The firewall is really on: the admin host may not reach a partition
# server's RPC port (the Firewall table gives it no access there).
if on admin timeout 2 bash -c '</dev/tcp/rt-ps1.internal/10200' 2>/dev/null; then
    echo "firewall: admin reached rt-ps1:10200" >&2; exit 1
fi
step "7b. 2 front ends listening"
for n in 1 2; do start "rt-fe$n" rt-frontend@.service "fe$n"; done
ready rt-fe1 rt-fe2
for n in 1 2; do wait_for 60 on "rt-fe$n" curl -s -o /dev/null http://127.0.0.1:10002/; done
done_step
admin rtctl status >"$WORK/logs/status-up.txt" 2>&1 || true

# The monitoring host (admin here) scrapes every daemon's /metrics through
# the firewall: the masters with the admin token, the front ends where
# their config has an http key.
step "monitoring: GET /metrics of every daemon from the admin host"
for n in 1 2 3; do
    on admin curl -sf -o /dev/null -H "Authorization: Bearer $(cat "$CRED/admin.token")" "http://rt-m$n.internal:10101/metrics"
    on admin curl -sf -o /dev/null "http://rt-ps$n.internal:10201/metrics"
done
nfe=0
for n in 1 2; do
    if on "rt-fe$n" grep -q '^http *=' "/etc/rangetable/fe$n.conf"; then
        on admin curl -sf -o /dev/null "http://rt-fe$n.internal:10003/metrics"
        nfe=$((nfe + 1))
    fi
done
done_step "3 masters, 3 partition servers, $nfe front ends"

# ---- 8. SDK ----
KEY=$(awk '{print $2}' "$CRED/accounts")
cs() { echo "DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey=$KEY;TableEndpoint=https://rt-fe$1.internal:10443/myaccount"; }
client() { on admin env REQUESTS_CA_BUNDLE=/root/rt-credentials/fe-tls/cert.pem "$@"; }
step "8. SDK over HTTPS: table, 200 entities through both front ends, read back"
client "$PY" - "$(cs 1)" "$(cs 2)" <<'EOF'
import sys
from azure.data.tables import TableServiceClient
a, b = (TableServiceClient.from_connection_string(c) for c in sys.argv[1:3])
a.create_table("smoke")
ta, tb = a.get_table_client("smoke"), b.get_table_client("smoke")
for i in range(200):
    (ta if i % 2 else tb).create_entity({"PartitionKey": "p", "RowKey": "%04d" % i, "v": i})
got = sorted(e["v"] for e in ta.list_entities())
assert got == list(range(200)), got[:5]
assert tb.get_entity("p", "0007")["v"] == 7
print("200 entities written through fe1+fe2, read back")
EOF
done_step
step "8b. SDK over HTTP on each front end's loopback (the local check port)"
for n in 1 2; do
    on "rt-fe$n" "$PY" - "DefaultEndpointsProtocol=http;AccountName=myaccount;AccountKey=$KEY;TableEndpoint=http://127.0.0.1:10002/myaccount" <<'PYEOF'
import sys
from azure.data.tables import TableServiceClient
t = TableServiceClient.from_connection_string(sys.argv[1]).get_table_client("smoke")
assert sum(1 for _ in t.list_entities(select=["RowKey"])) == 200
PYEOF
done
done_step "200 entities read through each"


# ---- 9. rolling restart under load ----
# The writer: the official SDK (10 retries) creating entities through both
# front ends in turn, skipping one taken "out of the load balancer" (the
# file /root/out names it); every HTTP answer's status is counted.
cat >"$WORK/hosts/admin/root.up/writer.py" <<'PYEOF'
import json, os, sys, time, collections
from azure.data.tables import TableServiceClient
from azure.core.exceptions import AzureError
cls = [TableServiceClient.from_connection_string(c, retry_total=10).get_table_client("roll")
       for c in sys.argv[1:3]]
cls[0].create_table()
codes = collections.Counter(); acked = []; errors = []
def hook(resp):
    codes[resp.http_response.status_code] += 1
i = 0
while not os.path.exists("/root/stop"):
    out = open("/root/out").read().strip() if os.path.exists("/root/out") else ""
    k = i % 2
    if out == "fe%d" % (k + 1):
        k = 1 - k
    try:
        cls[k].create_entity({"PartitionKey": "p%d" % (i % 8), "RowKey": "%07d" % i, "v": i},
                             raw_response_hook=hook)
        acked.append(i)
    except AzureError as e:
        errors.append("%d: %s" % (i, str(e).splitlines()[0]))
    i += 1
stored = {int(e["RowKey"]) for e in cls[1].list_entities(select=["RowKey"])}
json.dump({"attempts": i, "acked": len(acked), "errors": errors, "codes": codes,
           "stored": len(stored), "lost": len(set(acked) - stored)},
          open("/root/writer.json", "w"))
PYEOF
master_id_of() { echo "${1#rt-m}"; }
leader_host() { echo "rt-m$(status_json | jq -r '.masters[] | select(.leader) | .id')"; }
ps_id_of() { status_json | jq -r --arg a "$1.internal:10200" '.servers[] | select(.addr == $a) | .id'; }
caught_up() { # caught_up N: master N is back, with the leader's commit index
    jq_status "(.masters[] | select(.leader) | .commit_index) as \$c
        | .masters[] | select(.id == $1) | (.leader or (.commit_index >= \$c and .last_contact_ms < 1000))"
}
in_sync() { jq_status '.replication.under_replicated == 0 and ([.servers[] | select(.state == "up")] | length == 3)'; }
new_leader() { [ "$(leader_host)" != "$1" ] && [ "$(leader_host)" != rt-m ]; }

on admin rm -f /root/stop /root/out
(exec nsenter -t "${HOLD[admin]}" -m -n -- env REQUESTS_CA_BUNDLE=/root/rt-credentials/fe-tls/cert.pem \
    "$PY" /root/writer.py "$(cs 1)" "$(cs 2)") >"$WORK/logs/writer.log" 2>&1 &
WRITER=$!
sleep 2
ROLL0=$(date +%s.%N)
LEAD=$(leader_host)
for h in rt-m1 rt-m2 rt-m3; do
    [ "$h" = "$LEAD" ] && continue
    step "9.1 master follower $h restarted, back with the leader's commit index"
    stop "$h"; start "$h" rt-master.service; ready "$h"
    wait_for 60 on admin curl -sf "http://$h.internal:10101/health"
    sleep 1   # the leader's view of it must be fresh: last contact < 1 s
    wait_for 60 caught_up "$(master_id_of "$h")"
    done_step
done
step "9.1 rtctl master transfer"
admin rtctl master transfer >>"$WORK/logs/roll.log" 2>&1
wait_for 30 new_leader "$LEAD" || true
done_step "leader was $LEAD, now $(leader_host)"
step "9.1 old leader $LEAD restarted, back and caught up"
stop "$LEAD"; start "$LEAD" rt-master.service; ready "$LEAD"
wait_for 60 on admin curl -sf "http://$LEAD.internal:10101/health"
sleep 1
wait_for 60 caught_up "$(master_id_of "$LEAD")"
done_step
for n in 1 2 3; do
    h=rt-ps$n
    step "9.2 $h: rtctl handover"
    admin rtctl handover "$(ps_id_of "$h")" >>"$WORK/logs/roll.log" 2>&1
    done_step
    step "9.2 $h: restart until nothing is under-replicated"
    stop "$h"; start "$h" rt-partition-server@.service "ps$n"; ready "$h"
    wait_for 120 in_sync
    done_step
done
for n in 1 2; do
    h=rt-fe$n
    step "9.3 $h out of the pool, restarted, listening, back"
    on admin sh -c "echo fe$n > /root/out"; sleep 0.3
    stop "$h"; start "$h" rt-frontend@.service "fe$n"; ready "$h"
    wait_for 60 on "$h" curl -s -o /dev/null http://127.0.0.1:10002/
    on admin rm -f /root/out
    done_step
done
T0=$ROLL0; STEP="9. whole roll under load"
on admin touch /root/stop
wait "$WRITER"; WRITER=
WJ=$WORK/hosts/admin/root.up/writer.json
done_step "$(jq -c '{attempts, acked, errors: (.errors | length), stored, lost, codes}' "$WJ")"
jq . "$WJ" >"$WORK/logs/writer.json"

# ---- 10. backup and restore ----
DATE=$(date -u +%F)
step "10.1 rt-backup backup roll (over HTTPS, from the admin host)"
client env RT_CONNECTION_STRING="$(cs 1)" rt-backup backup roll "/root/backup/$DATE" >>"$WORK/logs/backup.log" 2>&1
done_step "$(jq -c '{entities}' "$WORK/hosts/admin/root.up/backup/$DATE/roll.manifest.json" 2>/dev/null)"
step "10.1 rt-backup restore --as rollcopy"
client env RT_CONNECTION_STRING="$(cs 2)" rt-backup restore --as rollcopy roll "/root/backup/$DATE" >>"$WORK/logs/backup.log" 2>&1
done_step
NROLL=$(client "$PY" -c 'import sys
from azure.data.tables import TableServiceClient as S
s = S.from_connection_string(sys.argv[1])
print(*(sum(1 for _ in s.get_table_client(t).list_entities(select=["RowKey"])) for t in ("roll", "rollcopy")))' "$(cs 1)")
echo "   roll, rollcopy entities: $NROLL" | tee -a "$TIMINGS"

step "10.2 mdb_copy of the 3 running partition servers"
for n in 1 2 3; do
    on "rt-ps$n" install -d -o rangetable "/var/backups/rt/ps$n"
    as "rt-ps$n" mdb_copy "/var/lib/rangetable/ps$n" "/var/backups/rt/ps$n"
done
done_step
F=$(leader_host); F=$([ "$F" = rt-m1 ] && echo rt-m2 || echo rt-m1)
step "10.2 follower master $F stopped, cp -a, started"
stop "$F"
on "$F" install -d /var/backups/rt
on "$F" cp -a /var/lib/rangetable/master /var/backups/rt/master
start "$F" rt-master.service; ready "$F"
done_step
wait_for 60 caught_up "$(master_id_of "$F")"
NSMOKE=$(client "$PY" -c 'import sys
from azure.data.tables import TableServiceClient as S
t = S.from_connection_string(sys.argv[1]).get_table_client("smoke")
t.create_entity({"PartitionKey": "p", "RowKey": "after"})
print(sum(1 for _ in t.list_entities(select=["RowKey"])))' "$(cs 1)")
echo "   smoke before restore (with a write made after the backup): $NSMOKE" | tee -a "$TIMINGS"

step "10.2 restore: everything stopped"
for h in rt-fe1 rt-fe2 rt-ps1 rt-ps2 rt-ps3 rt-m1 rt-m2 rt-m3; do stop "$h"; done
done_step
step "10.2 restore: files back"
for h in rt-m1 rt-m2 rt-m3; do
    if [ "$h" != "$F" ]; then   # scp from $F
        on "$h" install -d /var/backups/rt
        cp -a "$WORK/hosts/$F/var.up/backups/rt/master" "$WORK/hosts/$h/var.up/backups/rt/master"
    fi
    on "$h" sh -c "rm -rf /var/lib/rangetable/master && cp -a /var/backups/rt/master /var/lib/rangetable/master && chown -R rangetable: /var/lib/rangetable"
done
for n in 1 2 3; do
    on "rt-ps$n" sh -c "rm -f /var/lib/rangetable/ps$n/*.mdb && install -o rangetable -m 0600 /var/backups/rt/ps$n/data.mdb /var/lib/rangetable/ps$n/ && chown -R rangetable: /var/lib/rangetable"
done
done_step
step "10.2 restore: masters, partition servers, front ends started until healthy"
for n in 1 2 3; do start "rt-m$n" rt-master.service; done
ready rt-m1 rt-m2 rt-m3
wait_for 60 jq_status '[.masters[] | select(.leader == true)] | length == 1'
for n in 1 2 3; do start "rt-ps$n" rt-partition-server@.service "ps$n"; done
ready rt-ps1 rt-ps2 rt-ps3
wait_for 120 in_sync
for n in 1 2; do start "rt-fe$n" rt-frontend@.service "fe$n"; done
ready rt-fe1 rt-fe2
for n in 1 2; do wait_for 60 on "rt-fe$n" curl -s -o /dev/null http://127.0.0.1:10002/; done
done_step
AFTER=$(client "$PY" -c 'import sys
from azure.data.tables import TableServiceClient as S
t = S.from_connection_string(sys.argv[1]).get_table_client("smoke")
rows = [e["RowKey"] for e in t.list_entities(select=["RowKey"])]
print(len(rows), "after" in rows)' "$(cs 2)")
echo "   smoke after restore: entities, has the post-backup write: $AFTER" | tee -a "$TIMINGS"
echo "timings: $TIMINGS"
