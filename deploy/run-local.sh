#!/usr/bin/env bash
# Runs a local rangetable cluster in the foreground: rt-master, three
# rt-partition-server and one rt-frontend on 127.0.0.1, with the development
# account (devstoreaccount1 and its well-known key), so that
# UseDevelopmentStorage=true works. The master keeps every table's range on
# all three partition servers (its default --replication-factor 3). Ctrl-C
# stops every process. Like the storage emulators, it lets a deleted
# table's name be created again at once (rt-master --delete-grace-ms 0):
# test suites pointed at it delete and re-create tables of the same name
# back to back, where Azure (and rt-master's default, 30 s) answers 409
# TableBeingDeleted for a while.
#
# Usage: deploy/run-local.sh [--data DIR] [--port N] [--masters N]
#                            [--no-build] [--help]
#
#   --data DIR   data directory (default ./rt-data in the repository; env
#                RT_DATA). Kept across runs: restart with the same DIR and
#                your tables are still there.
#   --port N     front-end HTTP port (default 10002; env RT_FE_PORT); its
#                metrics listener is on N+1 (10003)
#   --masters N  1 (default), 3 or 5 masters (a Raft group): master i has
#                RPC/HTTP/raft ports 10100/10101/10102 + 10*(i-1); the
#                first master's HTTP port stays 10101 and rtctl finds the
#                leader from any of them
#
# Metrics (Prometheus text format, GET /metrics): every master on its HTTP
# port, partition server i on 127.0.0.1:10200+i, the front end on the
# Table API port + 1; the banner lists them, deploy/prometheus/ scrapes
# them.
#   --no-build   skip the dependency check and the build; use the binaries
#                already in the build directory
#   --help       this text
#
# Environment: RT_BUILD_DIR (default build/release), RT_MASTER_RPC (default
# 127.0.0.1:10100), RT_MASTER_HTTP (default 127.0.0.1:10101; rtctl reads it
# too), RT_LOG_LEVEL (debug|info|warn|error, default info), RT_SKIP_DEPS=1
# (do not check Debian packages), RT_RESTART=0 (a process that dies stops
# the cluster; by default it is restarted after RT_RESTART_DELAY, 5 s).
#
# The masters' admin API (split, move, drain, the status, the dashboard's
# data) needs the admin token in DIR/admin.token (made once, 0600, random,
# kept across runs; every master reads it with --admin-token-file): rtctl
# finds it through RT_ADMIN_TOKEN_FILE, or as ./rt-data/admin.token when
# run from the repository with the default DIR; the dashboard asks for it.
#
# Steps: (1) deploy/install-deps.sh installs missing Debian packages with
# apt-get (sudo when not root); (2) a Release build in build/release;
# (3) the cluster's credentials, once: `rtctl cluster init DIR/tls` makes a
# CA and a certificate per process (kept across runs), and every process
# gets --cluster-tls DIR/tls/NAME, so each RPC connection is mutual TLS;
# (4) the cluster, logs in DIR/logs/*.log. See deploy/README.md.
set -euo pipefail

ORIG_PWD=$PWD
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The well-known development account (Azurite/Azure emulator); see
# https://learn.microsoft.com/azure/storage/common/storage-use-azurite.
DEV_ACCOUNT=devstoreaccount1
DEV_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

DATA=${RT_DATA:-}
FE_PORT=${RT_FE_PORT:-10002}
BUILD=1
BUILD_DIR=${RT_BUILD_DIR:-build/release}
MASTER_RPC=${RT_MASTER_RPC:-127.0.0.1:10100}
MASTER_HTTP=${RT_MASTER_HTTP:-127.0.0.1:10101}
LOG_LEVEL=${RT_LOG_LEVEL:-info}
N_PS=3
N_MASTERS=1
START_TIMEOUT=30 # seconds per readiness wait
STOP_TIMEOUT=10  # seconds before SIGKILL
RESTART=${RT_RESTART:-1}            # restart a process that died on its own
RESTART_DELAY=${RT_RESTART_DELAY:-5} # seconds before that restart
CRASH_WINDOW=10 # an exit this soon after a start counts as a crash loop
CRASH_MAX=3     # ... and this many in a row stop the cluster

say() { printf '[run-local] %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}
usage() { sed -n '2,38s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

while (($#)); do
    case "$1" in
    --data)
        (($# >= 2)) || die "--data needs a directory"
        DATA=$2
        shift 2
        ;;
    --data=*)
        DATA=${1#--data=}
        shift
        ;;
    --port)
        (($# >= 2)) || die "--port needs a number"
        FE_PORT=$2
        shift 2
        ;;
    --port=*)
        FE_PORT=${1#--port=}
        shift
        ;;
    --masters)
        (($# >= 2)) || die "--masters needs a number"
        N_MASTERS=$2
        shift 2
        ;;
    --masters=*)
        N_MASTERS=${1#--masters=}
        shift
        ;;
    --no-build)
        BUILD=0
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        die "unknown argument: $1"
        ;;
    esac
done

if ! [[ "$FE_PORT" =~ ^[0-9]{1,5}$ ]] || ((FE_PORT < 1 || FE_PORT > 65534)); then
    die "--port: not a port number below 65535: $FE_PORT"
fi
FE_METRICS_PORT=$((FE_PORT + 1))
PS_METRICS_BASE=10200 # partition server i: metrics on 10200+i
case "$N_MASTERS" in
1 | 3 | 5) ;;
*) die "--masters: 1, 3 or 5, not $N_MASTERS" ;;
esac

# Paths the user gave are relative to where they ran us; the default data
# directory lives in the repository.
if [[ -z "$DATA" ]]; then
    DATA=$ROOT/rt-data
elif [[ "$DATA" != /* ]]; then
    DATA=$ORIG_PWD/$DATA
fi
cd "$ROOT"
[[ "$BUILD_DIR" == /* ]] || BUILD_DIR=$ROOT/$BUILD_DIR

MASTER_BIN=$BUILD_DIR/master/rt-master
PS_BIN=$BUILD_DIR/partition-server/rt-partition-server
FE_BIN=$BUILD_DIR/frontend/rt-frontend
RTCTL_BIN=$BUILD_DIR/tools/rtctl

# ---------------------------------------------------------------- build
if ((BUILD)); then
    ./deploy/install-deps.sh
    say "building (Release) in ${BUILD_DIR#"$ROOT"/}"
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DRT_TESTS=OFF >/dev/null
    cmake --build "$BUILD_DIR" -j"$(nproc)" \
        --target rt-master rt-partition-server rt-frontend rtctl
fi
for b in "$MASTER_BIN" "$PS_BIN" "$FE_BIN" "$RTCTL_BIN"; do
    [[ -x "$b" ]] || die "$b not found (build it, or drop --no-build)"
done

# ---------------------------------------------------------------- processes
RUN=$DATA/run # port files of this run
LOGS=$DATA/logs
mkdir -p "$RUN" "$LOGS"
for i in $(seq 1 "$N_PS"); do mkdir -p "$DATA/ps$i"; done
rm -f "$RUN"/*.ports

names=() # parallel arrays, in start order
pids=()
cmds=()   # each process's command line, quoted (printf %q), for restarts
started=() # SECONDS at each process's last start
quick=()   # exits in a row within CRASH_WINDOW of a start
stopping=0

# alive PID: true while the process exists and is not a zombie.
alive() {
    local st=
    [[ -r /proc/$1/stat ]] || return 1
    read -r _ _ st _ <"/proc/$1/stat" 2>/dev/null || return 1
    [[ "$st" != Z ]]
}

# Sends SIGTERM to the listed indexes of pids[], waits up to STOP_TIMEOUT,
# then SIGKILLs what is left, and reaps them.
stop_group() {
    local i deadline
    for i in "$@"; do
        alive "${pids[$i]}" && kill -TERM "${pids[$i]}" 2>/dev/null
    done
    deadline=$((SECONDS + STOP_TIMEOUT))
    for i in "$@"; do
        while alive "${pids[$i]}" && ((SECONDS < deadline)); do
            sleep 0.1
        done
        if alive "${pids[$i]}"; then
            say "${names[$i]} (pid ${pids[$i]}) ignored SIGTERM for ${STOP_TIMEOUT}s: SIGKILL"
            kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
        wait "${pids[$i]}" 2>/dev/null || true
    done
}

# Stops what we started: front end first, then the partition servers, then
# the master, so nobody logs a storm of reconnects.
cleanup() {
    ((stopping)) && return
    stopping=1
    ((${#pids[@]})) || return 0
    say "stopping..."
    local i fe=() ps=() ms=()
    for i in "${!names[@]}"; do
        case "${names[$i]}" in
        frontend) fe+=("$i") ;;
        ps*) ps+=("$i") ;;
        *) ms+=("$i") ;;
        esac
    done
    ((${#fe[@]})) && stop_group "${fe[@]}"
    ((${#ps[@]})) && stop_group "${ps[@]}"
    ((${#ms[@]})) && stop_group "${ms[@]}"
    say "stopped. Data kept in $DATA"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# start NAME BIN ARGS...: runs BIN in its own session (so a Ctrl-C reaches
# only this script, which then stops the cluster in order), output to
# LOGS/NAME.log (the previous run's log is kept as NAME.log.1).
start() {
    local name=$1 bin=$2
    shift 2
    local log=$LOGS/$name.log
    [[ -f "$log" ]] && mv -f "$log" "$log.1"
    setsid "$bin" --log-level "$LOG_LEVEL" "$@" >"$log" 2>&1 </dev/null &
    names+=("$name")
    pids+=("$!")
    cmds+=("$(printf '%q ' "$bin" "$@")")
    started+=("$SECONDS")
    quick+=(0)
}

# restart I: starts process I again with its command line (its log goes
# on in the same file); gives up (exit 1) when it exited within
# CRASH_WINDOW seconds of its start CRASH_MAX times in a row.
restart() {
    local i=$1 log=$LOGS/${names[$1]}.log
    if ((SECONDS - started[i] < CRASH_WINDOW)); then
        quick[i]=$((quick[i] + 1))
    else
        quick[i]=0
    fi
    if ((quick[i] >= CRASH_MAX)); then
        say "${names[$i]} exited $CRASH_MAX times within ${CRASH_WINDOW}s of its start: giving up"
        exit 1
    fi
    say "restarting ${names[$i]} in ${RESTART_DELAY}s (RT_RESTART=0: stop the cluster instead)"
    sleep "$RESTART_DELAY"
    eval "set -- ${cmds[$i]}"
    local bin=$1
    shift
    setsid "$bin" --log-level "$LOG_LEVEL" "$@" >>"$log" 2>&1 </dev/null &
    pids[i]=$!
    started[i]=$SECONDS
    say "${names[$i]} restarted (pid ${pids[$i]})"
}

# Fails with the tail of NAME's log when its process has exited.
check_alive() {
    local i
    for i in "${!names[@]}"; do
        if ! alive "${pids[$i]}"; then
            local rc=0
            wait "${pids[$i]}" 2>/dev/null || rc=$?
            say "${names[$i]} (pid ${pids[$i]}) exited during startup (status $rc); last lines of $LOGS/${names[$i]}.log:"
            tail -n 25 "$LOGS/${names[$i]}.log" | sed 's/^/    /' >&2
            exit 1
        fi
    done
}

# wait_for WHAT CMD...: polls CMD (every 0.2 s) until it succeeds, while
# checking that every started process is still alive.
wait_for() {
    local what=$1 deadline=$((SECONDS + START_TIMEOUT))
    shift
    until "$@" >/dev/null 2>&1; do
        check_alive
        ((SECONDS < deadline)) || die "timed out after ${START_TIMEOUT}s waiting for $what (logs in $LOGS)"
        sleep 0.2
    done
    check_alive
}

# tcp_open HOST:PORT: true when something accepts connections there.
tcp_open() {
    local host=${1%:*} port=${1##*:}
    timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}

# http_ok HOST:PORT PATH: true when GET PATH answers 200 (bash only: no curl
# on a fresh machine).
http_ok() {
    local host=${1%:*} port=${1##*:}
    timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port
        printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' '$2' '$1' >&3
        head -n 1 <&3" 2>/dev/null | grep -q '^HTTP/1\.[01] 200'
}

# servers_up N: true when the master reports at least N servers up.
servers_up() {
    local n
    n=$("$RTCTL_BIN" --master-http "$MASTER_HTTPS" status --json 2>/dev/null |
        grep -o '"state"[[:space:]]*:[[:space:]]*"up"' | wc -l)
    ((n >= $1))
}

# tls_node NAME ROLE: prints NAME's --cluster-tls directory. The cluster CA
# is made on the first run (rtctl cluster init DATA/tls); a node missing
# from it (a master added by a later --masters N) is issued then.
TLS=$DATA/tls
tls_node() {
    if [[ ! -f "$TLS/ca.key" ]]; then
        say "creating the cluster CA and node certificates in $TLS (rtctl cluster init)"
        "$RTCTL_BIN" cluster init "$TLS" --masters master1 \
            --partition-servers "$(seq -s, -f 'ps%g' 1 "$N_PS")" \
            --frontends frontend --admin operator >/dev/null
    fi
    if [[ ! -f "$TLS/$1/node.key" ]]; then
        "$RTCTL_BIN" cluster add-node "$TLS" "$2" "$1" >/dev/null
    fi
    echo "$TLS/$1"
}

# Master i: its data directory, RPC, HTTP and raft addresses (master 1
# keeps DATA/master and the RT_MASTER_* addresses).
master_dir() { if (($1 == 1)); then echo "$DATA/master"; else echo "$DATA/master$1"; fi; }
master_addr() { # I KIND(0 rpc, 1 http, 2 raft)
    local base
    case $2 in
    0) base=$MASTER_RPC ;;
    1) base=$MASTER_HTTP ;;
    2) base=${MASTER_RPC%:*}:$((${MASTER_RPC##*:} + 2)) ;;
    esac
    echo "${base%:*}:$((${base##*:} + 10 * ($1 - 1)))"
}
say "data directory: $DATA"
if tcp_open "127.0.0.1:$FE_PORT"; then
    die "port $FE_PORT is already in use (another cluster or Azurite?); pick one with --port N"
fi
for a in $(for m in $(seq 1 "$N_MASTERS"); do master_addr "$m" 0; master_addr "$m" 1; master_addr "$m" 2; done); do
    if tcp_open "$a"; then
        die "$a is already in use (another rangetable cluster?); set RT_MASTER_RPC / RT_MASTER_HTTP"
    fi
done

# The admin token: 32 random bytes in hex, readable by its owner only
# (rt-master refuses it otherwise); coreutils only, no openssl CLI needed.
TOKEN_FILE=$DATA/admin.token
if [[ ! -s "$TOKEN_FILE" ]]; then
    mkdir -p "$DATA"
    (umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$TOKEN_FILE.tmp" &&
        echo >>"$TOKEN_FILE.tmp" && mv "$TOKEN_FILE.tmp" "$TOKEN_FILE")
    say "admin token written to $TOKEN_FILE"
fi
chmod 600 "$TOKEN_FILE"
export RT_ADMIN_TOKEN_FILE=$TOKEN_FILE

PEERS=
JOINERS=()
MASTER_RPCS=
MASTER_HTTPS=
for m in $(seq 1 "$N_MASTERS"); do
    PEERS+="${PEERS:+,}$m=$(master_addr "$m" 2)"
    MASTER_RPCS+="${MASTER_RPCS:+,}$(master_addr "$m" 0)"
    MASTER_HTTPS+="${MASTER_HTTPS:+,}$(master_addr "$m" 1)"
done
for m in $(seq 1 "$N_MASTERS"); do
    d=$(master_dir "$m")
    margs=(--id "$m" --listen "$(master_addr "$m" 0)"
        --http "$(master_addr "$m" 1)" --raft-listen "$(master_addr "$m" 2)"
        --data "$d" --port-file "$RUN/master$m.ports"
        --admin-token-file "$TOKEN_FILE"
        --delete-grace-ms 0
        --cluster-tls "$(tls_node "master$m" master)")
    if ((N_MASTERS > 1)); then
        if [[ -d "$(master_dir 1)/raft" && ! -d "$d/raft" ]]; then
            # The group exists (master 1 ran before, maybe alone): a new
            # member joins it empty and is added below; bootstrapping it
            # would found a second group beside the first.
            margs+=(--join)
            JOINERS+=("$m")
        else
            margs+=(--peers "$PEERS")
            # A new group is bootstrapped once, by every initial member; a
            # member with state never again (its configuration is in its
            # log).
            [[ -d "$d/raft" ]] || margs+=(--bootstrap)
        fi
    fi
    mkdir -p "$d"
    name=master
    ((N_MASTERS == 1)) || name=master$m
    start "$name" "$MASTER_BIN" "${margs[@]}"
done
for m in $(seq 1 "$N_MASTERS"); do
    wait_for "rt-master $m on $(master_addr "$m" 1)" http_ok "$(master_addr "$m" 1)" /health
done
# master_add M: adds joining master M to the group (the leader answers
# once it has caught up and votes).
master_add() {
    "$RTCTL_BIN" --master-http "$MASTER_HTTPS" master add "$1" "$(master_addr "$1" 2)"
}
for m in "${JOINERS[@]}"; do
    say "adding master $m to the existing group (rtctl master add)"
    wait_for "master $m added" master_add "$m"
done
export RT_MASTER_HTTP=$MASTER_HTTPS

for i in $(seq 1 "$N_PS"); do
    start "ps$i" "$PS_BIN" --listen 127.0.0.1:0 --master "$MASTER_RPCS" \
        --data "$DATA/ps$i" --port-file "$RUN/ps$i.ports" \
        --http "127.0.0.1:$((PS_METRICS_BASE + i))" \
        --cluster-tls "$(tls_node "ps$i" ps)"
done
for i in $(seq 1 "$N_PS"); do
    wait_for "rt-partition-server ps$i" test -s "$RUN/ps$i.ports"
done

start frontend "$FE_BIN" --listen "127.0.0.1:$FE_PORT" --master "$MASTER_RPCS" \
    --port-file "$RUN/frontend.ports" --http "127.0.0.1:$FE_METRICS_PORT" \
    --cluster-tls "$(tls_node frontend fe)"
wait_for "rt-frontend on 127.0.0.1:$FE_PORT" tcp_open "127.0.0.1:$FE_PORT"
wait_for "$N_PS partition servers up (rtctl status)" servers_up "$N_PS"

ENDPOINT=http://127.0.0.1:$FE_PORT/$DEV_ACCOUNT
if [[ "$FE_PORT" == 10002 ]]; then
    CONN='UseDevelopmentStorage=true'
else
    CONN="DefaultEndpointsProtocol=http;AccountName=$DEV_ACCOUNT;AccountKey=$DEV_KEY;TableEndpoint=$ENDPOINT;"
fi
RTCTL_SHOWN=${RTCTL_BIN#"$ROOT"/}
[[ "$MASTER_HTTP" == 127.0.0.1:10101 ]] || RTCTL_SHOWN="RT_MASTER_HTTP=$MASTER_HTTP $RTCTL_SHOWN"

cat >&2 <<BANNER

  rangetable is running ($N_MASTERS master(s), $N_PS partition servers, front end)

  table endpoint   $ENDPOINT
  account / key    $DEV_ACCOUNT / $DEV_KEY
  connection       $CONN
  status           $RTCTL_SHOWN status
                   (rtctl reads the admin token from RT_ADMIN_TOKEN_FILE:
                    export RT_ADMIN_TOKEN_FILE=$TOKEN_FILE)
  dashboard        http://$MASTER_HTTP/ (asks once for the admin token,
                   the line in $TOKEN_FILE)
  admin API        curl -H "Authorization: Bearer \$(cat $TOKEN_FILE)" \\
                        http://$MASTER_HTTP/api/status
  metrics          http://$MASTER_HTTP/metrics (master; with the admin token)
                   http://127.0.0.1:$((PS_METRICS_BASE + 1))/metrics .. :$((PS_METRICS_BASE + N_PS)) (ps1..ps$N_PS)
                   http://127.0.0.1:$FE_METRICS_PORT/metrics (front end)
  data             $DATA (kept across restarts)
  cluster RPC      mutual TLS, credentials in $TLS (CA key: $TLS/ca.key)
  logs             $LOGS/{master,ps1..ps$N_PS,frontend}.log

  Ctrl-C stops everything.

BANNER

# Foreground until a signal. A process that dies on its own is reported
# and, like a service supervisor would, started again after RESTART_DELAY
# (with replication factor 3 the other partition servers serve its ranges
# meanwhile, and it rejoins); RT_RESTART=0 stops the cluster instead.
while true; do
    rc=0
    wait -n "${pids[@]}" || rc=$?
    for i in "${!names[@]}"; do
        if ! alive "${pids[$i]}"; then
            wait "${pids[$i]}" 2>/dev/null || true
            say "${names[$i]} (pid ${pids[$i]}) exited unexpectedly (status $rc); last lines of $LOGS/${names[$i]}.log:"
            tail -n 25 "$LOGS/${names[$i]}.log" | sed 's/^/    /' >&2
            ((RESTART)) || exit 1
            restart "$i"
        fi
    done
done
