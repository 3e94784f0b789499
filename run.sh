#!/usr/bin/env bash
# LongGe entry point: bootstraps a virtual environment, then hands over to `python -m longge`.
#
#   ./run.sh test                 lint, type-check and run the test suite
#   ./run.sh radio-bench [opts]   stream frames between two emulated radios
#   ./run.sh modem-bench [opts]   the modem's AVR image on a simulated ATmega328P
#   ./run.sh air [opts]           run the air emulator in the foreground
#   ./run.sh help                 list every subcommand
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv="$here/.venv"
stamp="$venv/.longge-installed"

say() { printf 'run.sh: %s\n' "$*" >&2; }

# rustup's cargo lives in ~/.cargo/bin, which a non-login shell (CI, sudo) may not have on PATH
if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-${HOME:-/root}/.cargo}/bin/cargo" ]; then
    export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
fi

pick_python() {
    local cand
    for cand in python3.13 python3.12 python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1 &&
            "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$cand"
            return 0
        fi
    done
    return 1
}

# Debian packages: what every node needs (the link, its measurements), and what only the
# emulator needs (the modem firmware's AVR and host builds, simavr, the rf24 chips' preload;
# systemd for systemd-analyze, which scores the units' exposure in the suite).
# Installed only when root and missing; a Pi running its daemon never gets the second set.
debian_packages=(iproute2 iptables iperf3 libiperf0 irtt iputils-ping curl procps kmod tmux)
emulator_packages=(make gcc libc6-dev gcc-avr avr-libc binutils-avr simavr libsimavr-dev systemd)

install_debian_packages() {
    local missing=() pkg
    command -v dpkg-query >/dev/null 2>&1 || return 0
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        say "missing Debian packages: ${missing[*]} (run as root once, or: sudo apt-get install ${missing[*]})"
        return 1
    fi
    say "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || say "apt-get update failed (above)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
        say "could not install: ${missing[*]} (apt-get above); the next run tries again"
        return 1
    fi
}

# The packages of one set, once: its stamp (in the venv) is written only once all are there,
# so a first run as a normal user (which cannot install them) does not stop a later root run.
ensure_packages() {
    local debs_stamp="$venv/$1" debs_want
    shift
    debs_want=$(printf '%s\n' "$*" | sha256sum | cut -d' ' -f1)
    [ "$(cat "$debs_stamp" 2>/dev/null)" = "$debs_want" ] && return 0
    install_debian_packages "$@" || return 1
    mkdir -p "$venv" 2>/dev/null && echo "$debs_want" >"$debs_stamp" 2>/dev/null || true
}

# Does this command use the emulator (the air, emulated chips, the simulated modem)? A node's
# own commands do not: its daemon and units, status, doctor, keys, plots, a scan with its radio
# (--backend rf24 or --config); nor a measurement of the link that runs here (a daemon's
# control socket) or of a base named with --host.
needs_emulator() {
    local arg
    case "${1:-help}" in
        daemon | status | radio | servers | doctor | keygen | plot | help | -h | --help | --version)
            return 1
            ;;
        scan)
            for arg in "$@"; do
                case "$arg" in --backend=rf24 | rf24 | --config | --config=*) return 1 ;; esac
            done
            ;;
        tTest | lTest | tune | experiment)
            [ "${1:-}" = experiment ] && [ "${2:-}" = list ] && return 1
            [ -S /run/longge/longge0.sock ] && return 1
            for arg in "$@"; do
                case "$arg" in --host | --host=*) return 1 ;; esac
            done
            ;;
    esac
    return 0
}

bootstrap() {
    local py want
    # (both sets in one apt-get; when that fails, e.g. an emulator package this release does
    # not have, the node's own set still goes in)
    if [ "$emulator" = 0 ]; then
        ensure_packages .longge-debs "${debian_packages[@]}" || true
    elif ! ensure_packages .longge-debs-emulator "${debian_packages[@]}" "${emulator_packages[@]}" &&
        [ "$(id -u)" -eq 0 ]; then
        ensure_packages .longge-debs "${debian_packages[@]}" || true
    fi
    want=$(sha256sum "$here/pyproject.toml" | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    if [ ! -w "$here" ]; then
        say "cannot write to $here (it belongs to $(stat -c %U "$here")): run as its owner, or sudo"
        exit 1
    fi
    py=$(pick_python) || { say "Python >= 3.11 is required"; exit 1; }
    if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        # a first run stopped half-way (ensurepip had not run) or a Python that went away
        say "the venv in .venv is incomplete: making it again"
        rm -rf "$venv"
    fi
    if [ ! -x "$venv/bin/python" ]; then
        say "creating virtual environment in .venv ($py)"
        if ! "$py" -m venv "$venv" 2>/dev/null; then
            rm -rf "$venv"
            if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
                DEBIAN_FRONTEND=noninteractive apt-get update -qq
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
                "$py" -m venv "$venv"
            else
                say "could not create a venv: install python3-venv"
                exit 1
            fi
        fi
    fi
    say "installing LongGe and its dependencies into .venv"
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$venv/bin/python" -m pip install -q -e "$here[dev]"
    echo "$want" >"$stamp"
}

# The compiled air server (emulator/, Rust): built on first use and whenever its sources change.
# A fresh machine without cargo gets the distribution's toolchain when run as root.
build_air() {
    local crate="$here/emulator" air_stamp want
    air_stamp="$crate/target/.longge-built"
    want=$(cat "$crate/Cargo.toml" "$crate/Cargo.lock" "$crate"/src/*.rs | sha256sum | cut -d' ' -f1)
    if [ -f "$air_stamp" ] && [ "$(cat "$air_stamp")" = "$want" ] && [ -x "$crate/target/release/longge-air" ]; then
        return 0
    fi
    local cargo_bin
    cargo_bin=$(command -v cargo || true)
    if [ -z "$cargo_bin" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing a Rust toolchain (Debian packages cargo, rustc) for the air emulator"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq || say "apt-get update failed (above)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cargo rustc >/dev/null ||
            say "could not install cargo and rustc (apt-get above)"
        cargo_bin=$(command -v cargo || true)
    fi
    if [ -z "$cargo_bin" ]; then
        say "cargo is missing: the compiled air cannot be built (run as root once, or install Rust);"
        say "the Python air is used instead (LONGGE_AIR_SERVER=python)"
        export LONGGE_AIR_SERVER=python
        return 0
    fi
    # Its crates need Rust 1.71 (serde_json), and its Cargo.lock cargo 1.78: older distribution
    # toolchains (Debian 12's 1.63) cannot build it; say so rather than fail below.
    local rust_minor
    rust_minor=$(rustc --version 2>/dev/null | sed -n 's/^rustc 1\.\([0-9]*\).*/\1/p')
    if [ -n "$rust_minor" ] && [ "$rust_minor" -lt 78 ]; then
        say "Rust 1.$rust_minor is too old for the compiled air (it needs 1.78 or later, e.g. from"
        say "rustup); the Python air is used instead (slower: docs/emulator.md)"
        export LONGGE_AIR_SERVER=python
        return 0
    fi
    say "building the air emulator (emulator/, cargo build --release)"
    if ! "$cargo_bin" build --release --quiet --locked --manifest-path "$crate/Cargo.toml"; then
        say "building the air emulator failed (above): the Python air is used instead (slower)"
        export LONGGE_AIR_SERVER=python
        return 0
    fi
    echo "$want" >"$air_stamp"
}

# promtool, which checks status --prometheus in a test, comes with Debian's prometheus package;
# installing that package would also start a Prometheus server (and its node exporter) here, so
# only promtool is taken out of the package, into the venv.
ensure_promtool() {
    [ -x "$venv/bin/promtool" ] || command -v promtool >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || return 0
    local tmp
    tmp=$(mktemp -d)
    # (a machine whose package lists were never fetched, or were cleared, needs them first)
    if ! (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null) && [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
        (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null) || true
    fi
    if ls "$tmp"/prometheus_*.deb >/dev/null 2>&1 &&
        dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" &&
        install -m 755 "$tmp/x/usr/bin/promtool" "$venv/bin/promtool"; then
        say "promtool taken from Debian's prometheus package into .venv/bin (for the metrics test)"
    else
        say "could not get promtool (apt-get download prometheus): the metrics test skips here"
    fi
    rm -rf "$tmp"
}

run_tests() {
    cd "$here"
    local py="$venv/bin/python"
    ensure_promtool
    echo "== ruff"
    "$py" -m ruff check longge tests tools
    "$py" -m ruff format --check longge tests tools
    echo "== cargo (the air emulator: clippy, its unit tests)"
    build_air
    if [ "${LONGGE_AIR_SERVER:-}" != python ]; then
        (
            cd emulator
            # rustfmt and clippy come with rustup's toolchain, not always with a distribution's
            if cargo fmt --version >/dev/null 2>&1; then cargo fmt --check; fi
            if cargo clippy --version >/dev/null 2>&1; then
                cargo clippy --release --quiet --locked -- -D warnings
            fi
            cargo test --release --quiet --locked
        )
    fi
    echo "== mypy"
    "$py" -m mypy longge tools
    echo "== pytest"
    # Two workers: most tests wait on the emulated air's real time, not on a core. One worker
    # runs the tests of fixed system names (the testbed's namespaces...) one after another
    # (tests/conftest.py); LONGGE_TEST_WORKERS=0 runs everything in this process.
    "$py" -m pytest -n "${LONGGE_TEST_WORKERS:-2}" "$@"
}

emulator=1
if ! needs_emulator "$@"; then emulator=0; fi
# One bootstrap at a time (two terminals on a fresh clone would share one venv being made).
if { exec 9>>"$here/.run.lock"; } 2>/dev/null; then flock 9 2>/dev/null || true; fi
bootstrap
flock -u 9 2>/dev/null || true
if [ "$emulator" = 1 ]; then build_air; fi
cmd=${1:-help}
case "$cmd" in
    test)
        shift
        run_tests "$@"
        ;;
    *)
        exec "$venv/bin/python" -m longge "$@"
        ;;
esac
