#!/usr/bin/env bash
# Installs the Debian packages rangetable needs, and only those missing.
#
#   deploy/install-deps.sh            build + run dependencies
#   deploy/install-deps.sh --test     ... plus what the test suite needs
#   deploy/install-deps.sh PKG...     ... plus the named packages
#
# Uses dpkg-query to find what is missing, then apt-get update && apt-get
# install -y (through sudo when not root). Does nothing when everything is
# installed, so it is cheap to call on every run. RT_SKIP_DEPS=1 skips it
# (for non-Debian machines where you installed the equivalents yourself).
set -euo pipefail

# Build and run: compiler, CMake, and the libraries of CMakeLists.txt.
RT_BUILD_PKGS=(
    build-essential cmake pkg-config
    libuv1-dev libprotobuf-c-dev protobuf-c-compiler liblmdb-dev
    libssl-dev libmicrohttpd-dev libjansson-dev libraft-dev libxml2-dev
    zlib1g-dev
)
# libraft (the masters' consensus) must be >= 0.17.1: 0.15.0 in bookworm's
# main suite lacks Raft's rule against committing entries of an older term
# by counting replicas (canonical/raft#220). On bookworm it comes from
# bookworm-backports (0.22.1, the cowsql line), pinned for these packages
# only; nothing else is taken from backports.
RT_RAFT_MIN=0.17.1
RT_RAFT_PKGS=(libraft-dev libraft0)
# Tests: cmocka for unit tests; the official Azure SDK and pytest (run with
# /usr/bin/python3) for integration tests; Node.js and npm for the
# JavaScript SDK suite (tests/integration/test_sdk_js.py, which npm-installs
# @azure/data-tables into the build tree and needs Node >= 20).
# iproute2: `ip netns`, veth and bridges for the multi-host test
# (tests/integration/test_multihost.py). lmdb-utils: mdb_copy for the
# whole-cluster backup test (test_backup.py).
RT_TEST_PKGS=(libcmocka-dev python3 python3-azure python3-pytest python3-requests
    nodejs clang-format iproute2 lmdb-utils)
# Metrics tests: the Prometheus client's exposition-format parser, and
# promtool (in the prometheus package) to check deploy/prometheus/*.yml.
RT_TEST_PKGS+=(python3-prometheus-client prometheus)
# python3-cryptography makes test_https's CA and server certificates.
RT_TEST_PKGS+=(python3-cryptography)
# gnuplot-nox draws rt-sim compare's plots (test_sim checks the SVG).
RT_TEST_PKGS+=(gnuplot-nox)
# NodeSource's nodejs package bundles npm and conflicts with Debian's npm
# package: ask for npm only when no npm command exists.
if ! command -v npm >/dev/null 2>&1; then
    RT_TEST_PKGS+=(npm)
fi

log() { printf '[install-deps] %s\n' "$*" >&2; }

pkgs=("${RT_BUILD_PKGS[@]}")
for arg in "$@"; do
    case "$arg" in
    --test) pkgs+=("${RT_TEST_PKGS[@]}") ;;
    -h | --help)
        sed -n '2,11s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
        exit 0
        ;;
    -*)
        log "unknown option: $arg"
        exit 2
        ;;
    *) pkgs+=("$arg") ;;
    esac
done

if [[ "${RT_SKIP_DEPS:-0}" == 1 ]]; then
    log "RT_SKIP_DEPS=1: not checking packages"
    exit 0
fi

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    log "this is not a Debian-like system (no dpkg-query/apt-get)."
    log "install the equivalents of: ${pkgs[*]}"
    log "then re-run with RT_SKIP_DEPS=1"
    exit 1
fi

missing=()
for p in "${pkgs[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$p")
    elif [[ "$p" == libraft-dev ]]; then
        v=$(dpkg-query -W -f='${Version}' libraft-dev)
        if ! dpkg --compare-versions "$v" ge "$RT_RAFT_MIN"; then
            log "libraft-dev $v is older than $RT_RAFT_MIN: upgrading"
            missing+=("$p")
        fi
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

sudo=()
if [[ "$(id -u)" != 0 ]]; then
    if ! command -v sudo >/dev/null; then
        log "missing packages: ${missing[*]}"
        log "not root and no sudo: install them as root, then re-run"
        exit 1
    fi
    sudo=(sudo)
fi

# Adds bookworm-backports (deb822 source) and pins libraft to it, once.
add_raft_backports() {
    local codename src pin
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    [[ "$codename" == bookworm ]] || return 0
    src=/etc/apt/sources.list.d/rangetable-bookworm-backports.sources
    pin=/etc/apt/preferences.d/rangetable-libraft
    if [[ ! -e "$src" ]] &&
        ! grep -rqs 'bookworm-backports' /etc/apt/sources.list \
            /etc/apt/sources.list.d/; then
        log "adding bookworm-backports (for ${RT_RAFT_PKGS[*]} only): $src"
        printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" \
            "Suites: bookworm-backports" "Components: main" \
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
            "${sudo[@]}" tee "$src" >/dev/null
    fi
    if [[ ! -e "$pin" ]]; then
        printf '%s\n' "Package: ${RT_RAFT_PKGS[*]}" \
            "Pin: release n=bookworm-backports" "Pin-Priority: 990" |
            "${sudo[@]}" tee "$pin" >/dev/null
    fi
}
for p in "${missing[@]}"; do
    if [[ "$p" == libraft-dev ]]; then
        add_raft_backports
    fi
done

log "installing missing packages: ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
