# Shared helpers for the rt-load scenario scripts, bench/compare-azurite
# and bench/bench-fe (sourced, bash). Starts a local rangetable cluster
# on ephemeral loopback ports (port files), stops only the PIDs it started.
#
#   RT_BUILD_DIR   build tree with master/, partition-server/, frontend/,
#                  tools/ (default: build/release, built if missing)
#   RT_LOG_LEVEL   daemons' --log-level (default warn)
#   RT_MASTER_ARGS more rt-master flags, split on spaces (e.g.
#                  "--replication-factor 1"; default none: the master's
#                  own defaults, replication factor 3)
#   RT_PS_ARGS     more rt-partition-server flags, split on spaces (e.g.
#                  "--http 127.0.0.1:0" for /metrics; default none)
#   RT_FE_ARGS     more rt-frontend flags, split on spaces (e.g.
#                  "--http-pool-kib 32"; default none)
#   RT_CLUSTER_TLS 1 (default): the cluster RPC is mutual TLS (rtctl
#                  cluster init DIR/tls, --cluster-tls per process); 0:
#                  --insecure-rpc (plain TCP, to measure what TLS costs)
#
# After rt_cluster_start N_PS DIR: RT_ENDPOINT (http://127.0.0.1:PORT/
# devstoreaccount1), RT_MASTER_HTTP (127.0.0.1:PORT), RT_FE_PID, RT_PS_PIDS,
# RT_MASTER_PID. rt_cluster_stop stops them (front end, servers, master).

RT_ROOT=${RT_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
RT_BUILD_DIR=${RT_BUILD_DIR:-$RT_ROOT/build/release}
[[ "$RT_BUILD_DIR" == /* ]] || RT_BUILD_DIR=$RT_ROOT/$RT_BUILD_DIR
RT_LOG_LEVEL=${RT_LOG_LEVEL:-warn}
RT_LOAD=$RT_BUILD_DIR/tools/rt-load
RT_PIDS=()

rt_say() { printf '[%s] %s\n' "${RT_SCRIPT_NAME:-rt}" "$*" >&2; }
rt_die() {
    rt_say "error: $*"
    exit 1
}

# Builds the binaries when they are missing (Release, -j2).
rt_build() {
    local need=0 b
    for b in master/rt-master partition-server/rt-partition-server \
        frontend/rt-frontend tools/rt-load tools/rtctl "$@"; do
        [[ -x "$RT_BUILD_DIR/$b" ]] || need=1
    done
    if ((need)); then
        rt_say "building (Release) in $RT_BUILD_DIR"
        cmake -S "$RT_ROOT" -B "$RT_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
            >/dev/null || rt_die "cmake configure failed"
        cmake --build "$RT_BUILD_DIR" -j2 --target rt-master \
            rt-partition-server rt-frontend rt-load rtctl \
            $(for b in "$@"; do basename "$b"; done) >/dev/null ||
            rt_die "build failed"
    fi
}

# gnuplot for --plot (Debian gnuplot-nox), installed when missing.
rt_need_gnuplot() {
    command -v gnuplot >/dev/null 2>&1 && return 0
    rt_say "installing gnuplot-nox (for the plots)"
    local sudo=
    ((EUID == 0)) || sudo=sudo
    $sudo apt-get install -y -q gnuplot-nox >/dev/null 2>&1 ||
        { $sudo apt-get update -q >/dev/null 2>&1 &&
            $sudo apt-get install -y -q gnuplot-nox >/dev/null 2>&1; } ||
        rt_say "warning: could not install gnuplot-nox; no plots"
}

rt_alive() {
    local st=
    [[ -r /proc/$1/stat ]] || return 1
    read -r _ _ st _ <"/proc/$1/stat" 2>/dev/null || return 1
    [[ "$st" != Z ]]
}

# rt_port FILE KEY: waits (15 s) for KEY=PORT in FILE and prints PORT.
rt_port() {
    local i v
    for ((i = 0; i < 300; i++)); do
        if [[ -s "$1" ]]; then
            v=$(sed -n "s/^$2=//p" "$1")
            [[ -n "$v" ]] && { echo "$v"; return 0; }
        fi
        sleep 0.05
    done
    return 1
}

# rt_sec DIR NAME: the RPC security flags of process NAME (RT_CLUSTER_TLS).
rt_sec() {
    if [[ "${RT_CLUSTER_TLS:-1}" == 0 ]]; then
        echo --insecure-rpc
    else
        echo --cluster-tls "$1/tls/$2"
    fi
}

# rt_cluster_start N_PS DIR [frontend args...]
rt_cluster_start() {
    local nps=$1 dir=$2 i port mport hport
    shift 2
    mkdir -p "$dir/run" "$dir/logs"
    if [[ "${RT_CLUSTER_TLS:-1}" != 0 && ! -f "$dir/tls/ca.key" ]]; then
        "$RT_BUILD_DIR/tools/rtctl" cluster init "$dir/tls" --masters master \
            --partition-servers "$(seq -s, -f 'ps%g' 1 "$nps")" \
            --frontends frontend >/dev/null || rt_die "rtctl cluster init failed"
    fi
    # --status-open: the scenarios only read the status and /metrics (no
    # admin token to hand around); actions stay refused. Raft on an
    # ephemeral port: another cluster on the host may hold 10102.
    # shellcheck disable=SC2046 # rt_sec's words are flags
    "$RT_BUILD_DIR/master/rt-master" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
        --raft-listen 127.0.0.1:0 \
        --status-open $(rt_sec "$dir" master) \
        --data "$dir/master" --port-file "$dir/run/master.ports" \
        --log-level "$RT_LOG_LEVEL" ${RT_MASTER_ARGS:-} \
        >"$dir/logs/master.log" 2>&1 </dev/null &
    RT_MASTER_PID=$!
    RT_PIDS+=("$RT_MASTER_PID")
    mport=$(rt_port "$dir/run/master.ports" rpc) || rt_die "master did not start ($dir/logs/master.log)"
    hport=$(rt_port "$dir/run/master.ports" http) || rt_die "master: no http port"
    RT_MASTER_RPC=127.0.0.1:$mport
    RT_MASTER_HTTP=127.0.0.1:$hport
    RT_PS_PIDS=()
    for ((i = 1; i <= nps; i++)); do
        "$RT_BUILD_DIR/partition-server/rt-partition-server" \
            --listen 127.0.0.1:0 --master "$RT_MASTER_RPC" --data "$dir/ps$i" \
            $(rt_sec "$dir" "ps$i") \
            --port-file "$dir/run/ps$i.ports" --log-level "$RT_LOG_LEVEL" \
            ${RT_PS_ARGS:-} >"$dir/logs/ps$i.log" 2>&1 </dev/null &
        RT_PS_PIDS+=($!)
        RT_PIDS+=($!)
    done
    for ((i = 1; i <= nps; i++)); do
        rt_port "$dir/run/ps$i.ports" rpc >/dev/null || rt_die "ps$i did not start ($dir/logs/ps$i.log)"
    done
    "$RT_BUILD_DIR/frontend/rt-frontend" --listen 127.0.0.1:0 \
        $(rt_sec "$dir" frontend) \
        --master "$RT_MASTER_RPC" --port-file "$dir/run/frontend.ports" \
        --log-level "$RT_LOG_LEVEL" ${RT_FE_ARGS:-} "$@" \
        >"$dir/logs/frontend.log" 2>&1 </dev/null &
    RT_FE_PID=$!
    RT_PIDS+=("$RT_FE_PID")
    port=$(rt_port "$dir/run/frontend.ports" http) || rt_die "front end did not start ($dir/logs/frontend.log)"
    RT_FE_PORT=$port
    RT_ENDPOINT=http://127.0.0.1:$port/devstoreaccount1
    # Wait until the master sees every partition server up.
    for ((i = 0; i < 300; i++)); do
        local up
        up=$(curl -s --noproxy '*' "http://$RT_MASTER_HTTP/api/status" 2>/dev/null |
            grep -o '"state":"up"' | wc -l)
        ((up >= nps)) && return 0
        sleep 0.1
    done
    rt_die "partition servers not up at the master after 30 s"
}

# Stops what we started, by PID: front end, partition servers, master.
rt_cluster_stop() {
    local p i
    [[ -n "${RT_FE_PID:-}" ]] && rt_alive "$RT_FE_PID" && kill -TERM "$RT_FE_PID" 2>/dev/null
    for ((i = 0; i < 100; i++)); do rt_alive "${RT_FE_PID:-0}" || break; sleep 0.1; done
    for p in "${RT_PS_PIDS[@]:-}"; do
        [[ -n "$p" ]] && rt_alive "$p" && kill -TERM "$p" 2>/dev/null
    done
    for p in "${RT_PS_PIDS[@]:-}"; do
        for ((i = 0; i < 100; i++)); do rt_alive "${p:-0}" || break; sleep 0.1; done
    done
    [[ -n "${RT_MASTER_PID:-}" ]] && rt_alive "$RT_MASTER_PID" && kill -TERM "$RT_MASTER_PID" 2>/dev/null
    for p in "${RT_PIDS[@]:-}"; do
        [[ -n "$p" ]] || continue
        for ((i = 0; i < 100; i++)); do rt_alive "$p" || break; sleep 0.1; done
        rt_alive "$p" && kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null || true
    done
    RT_PIDS=()
    RT_FE_PID=
    RT_PS_PIDS=()
    RT_MASTER_PID=
}

# ---------------------------------------------------------------- scenarios
# rt_scenario_init NAME "$@": parses --out DIR (default
# $RT_BUILD_DIR/scenarios/NAME), --endpoint URL and --master-http H:P (use
# a running service instead of starting a local 3-server cluster),
# --quick (shorter steps). Sets OUT, EP, MH, QUICK and starts the cluster.
rt_scenario_init() {
    RT_SCRIPT_NAME=$1
    shift
    OUT=
    EP=
    MH=
    QUICK=0
    while (($#)); do
        case "$1" in
        --out) OUT=$2; shift 2 ;;
        --endpoint) EP=$2; shift 2 ;;
        --master-http) MH=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        -h | --help)
            sed -n '2,/^set /s/^# \{0,1\}//p' "$0" | grep -v '^set '
            exit 0
            ;;
        *) rt_die "unknown argument $1" ;;
        esac
    done
    OUT=${OUT:-$RT_BUILD_DIR/scenarios/$RT_SCRIPT_NAME}
    mkdir -p "$OUT"
    rm -f "$OUT"/*.csv "$OUT"/*.json "$OUT"/*.svg "$OUT"/*.png "$OUT"/*.gp
    rt_build
    rt_need_gnuplot
    if [[ -z "$EP" ]]; then
        RT_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rt-$RT_SCRIPT_NAME.XXXXXX")
        trap 'rt_cluster_stop; rm -rf "$RT_CLUSTER_DIR"' EXIT
        trap 'exit 130' INT TERM
        rt_cluster_start 3 "$RT_CLUSTER_DIR"
        EP=$RT_ENDPOINT
        MH=$RT_MASTER_HTTP
        rt_say "local cluster: $EP (master $MH), data in $RT_CLUSTER_DIR"
    fi
    RT_MH_ARGS=()
    [[ -n "$MH" ]] && RT_MH_ARGS=(--master-http "$MH")
    rt_say "results in $OUT"
}

# rt_step SUMMARY_CSV "k=v k=v" rt-load-args...: one rt-load run, its JSON
# summary appended as a row of SUMMARY_CSV (failures leave blanks).
rt_step() {
    local csv=$1 cols=$2 json
    shift 2
    json=$(mktemp "$OUT/.step.XXXXXX.json")
    rm -f "$json"
    rt_say "step $cols"
    "$RT_LOAD" --endpoint "$EP" --quiet --json "$json" "${RT_MH_ARGS[@]}" \
        "$@" | sed -n 's/^  \(all\|outcomes\|throttling\|error\)/  \1/p' >&2 || true
    # shellcheck disable=SC2086
    python3 "$RT_ROOT/tools/rt-load/scenarios/summarize.py" "$csv" "$json" $cols
    rm -f "$json"
}

# rt_gnuplot FILE.gp: renders the script to FILE.svg and FILE.png.
rt_gnuplot() {
    local base=${1%.gp}
    command -v gnuplot >/dev/null 2>&1 || return 0
    gnuplot -e "set terminal svg size 1000,640 dynamic; set output '$base.svg'" "$1" &&
        gnuplot -e "set terminal pngcairo size 1000,640; set output '$base.png'" "$1" ||
        rt_say "warning: gnuplot failed on $1"
}
