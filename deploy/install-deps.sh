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
    libssl-dev libmicrohttpd-dev libjansson-dev
)
# Tests: cmocka for unit tests; the official Azure SDK and pytest (run with
# /usr/bin/python3) for integration tests; Node.js and npm for the
# JavaScript SDK suite (tests/integration/test_sdk_js.py, which npm-installs
# @azure/data-tables into the build tree and needs Node >= 20).
RT_TEST_PKGS=(libcmocka-dev python3 python3-azure python3-pytest python3-requests
    nodejs clang-format)
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

log "installing missing packages: ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
