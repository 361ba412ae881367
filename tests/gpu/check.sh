#!/usr/bin/env bash
# Astraeus on a real NVIDIA machine, checked by hand: one line per check
# ("ok   …", "FAIL …: why", "skip …: why"), exit 1 when any failed.
#
#   bash tests/gpu/check.sh [--python PY] [--wheels DIR] [--env PY] [--budget SECONDS]
#                           [--docker-image IMAGE] [--keep] [--dry-run]
#
# It makes a venv over PY (default python3) with --system-site-packages (torch from the
# system), installs astraeus from tests/gpu/wheels/ with no index (tests/gpu/wheels.sh
# fills that folder where a registry is reachable), starts a daemon on a temporary home
# (process executor, NVML inventory) and runs tests/gpu/checks.py against it. The daemon
# is stopped, what its runs left is killed and the temporary home removed on any exit.
#   --env PY         use PY, which already has astraeus installed, instead of a venv
#   --budget S       seconds the checks may take in all (default 300: with the venv,
#                    the install and the clean-up, under ten minutes in all)
#   --docker-image   the image the docker check runs nvidia-smi in (no pulls)
#   --keep           keep the temporary home (its logs) and say where it is
#   --dry-run        check the arguments, the Python and the wheels; start nothing
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}
wheels=$here/wheels
env_python=""
budget=300
docker_image=""
keep=0
dry_run=0

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
die() { echo "check.sh: $*" >&2; exit 2; }
line() { printf '%-4s %s\n' "$1" "$2"; }

while [ $# -gt 0 ]; do
    case $1 in
        --python) [ $# -ge 2 ] || die "--python needs a value"; python=$2; shift 2 ;;
        --wheels) [ $# -ge 2 ] || die "--wheels needs a value"; wheels=$2; shift 2 ;;
        --env) [ $# -ge 2 ] || die "--env needs a value"; env_python=$2; shift 2 ;;
        --budget)
            [ $# -ge 2 ] || die "--budget needs a value"
            [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 30 ] && [ "$2" -le 540 ] \
                || die "--budget: a whole number of seconds, 30 to 540, got $2"
            budget=$2; shift 2 ;;
        --docker-image) [ $# -ge 2 ] || die "--docker-image needs a value"; docker_image=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done

checks=("nvml inventory" "process run sees its GPU" "process run sees no other GPU"
        "shared runs" "telemetry per process"
        "doctor --system" "docker gpu")  # as tests/gpu/checks.py names them, in its order
skip_rest() {  # every check, skipped: what they needed is missing
    for name in "${checks[@]}"; do line skip "$name: $1"; done
}

# ------------------------------------------------------------------ what it will use
failed=0
if [ -n "$env_python" ]; then
    if version=$(timeout 30 "$env_python" -c 'import astraeus_tui, runner, sys; print(sys.version.split()[0])' 2>&1); then
        line ok "python: $env_python $version, astraeus importable"
    else
        line FAIL "python: $env_python cannot import astraeus: ${version##*$'\n'}"; failed=1
    fi
else
    if version=$(timeout 30 "$python" -c 'import sys; print(sys.version.split()[0])' 2>&1); then
        torch=$(timeout 60 "$python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null \
                || echo "no torch")
        line ok "python: $python $version ($torch)"
    else
        line FAIL "python: $python does not run: ${version##*$'\n'}"; failed=1
    fi
    count=$(find "$wheels" -maxdepth 1 -name '*.whl' 2>/dev/null | wc -l)
    if [ "$count" -gt 0 ] && [ -n "$(find "$wheels" -maxdepth 1 -name 'astraeus-*.whl')" ]; then
        line ok "wheels: $count in $wheels, $(du -sm "$wheels" | cut -f1) MiB"
    else
        line FAIL "wheels: no astraeus wheel in $wheels (run tests/gpu/wheels.sh where a package registry is reachable, and carry the folder)"
        failed=1
    fi
fi
if [ "$dry_run" = 1 ]; then
    for name in "${checks[@]}"; do line skip "$name: --dry-run"; done
    exit $failed
fi
if [ "$failed" = 1 ]; then
    skip_rest "nothing to run them with"
    exit 1
fi

# ------------------------------------------------------------------ a home, a venv, a daemon
work=$(mktemp -d "${TMPDIR:-/tmp}/astraeus-gpu-check.XXXXXX") || die "no temporary folder"
chmod 700 "$work"
home=$work/home
socket=$home/astraeus.sock
daemon_pid=""

stop_pid() {  # SIGTERM, up to 15 s, then SIGKILL
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
}
cleanup() {
    trap "" INT TERM  # a second Ctrl-C must not cut the clean-up short
    trap - EXIT
    [ -n "$daemon_pid" ] && stop_pid "$daemon_pid"
    [ -f "$work/docker-daemon.pid" ] && stop_pid "$(cat "$work/docker-daemon.pid")"
    # the process executor's workers outlive the daemon: their groups, by what it wrote
    for meta in "$home"/workers/*/meta.json; do
        [ -f "$meta" ] || continue
        pgid=$(sed -n 's/.*"child_pgid": *\([0-9][0-9]*\).*/\1/p' "$meta")
        [ -n "$pgid" ] && [ "$pgid" -gt 1 ] && kill -KILL -- "-$pgid" 2>/dev/null
    done
    if [ "$keep" = 1 ]; then
        echo "kept: $work (the daemon's log: $home/serve.log)"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$env_python" ]; then
    py=$env_python
else
    py=$work/venv/bin/python
    if ! out=$(timeout 60 "$python" -m venv --system-site-packages "$work/venv" 2>&1); then
        # no ensurepip (Debian's python3-venv missing): a venv without pip, filled by
        # the system's pip
        rm -rf "$work/venv"
        if ! out=$(timeout 60 "$python" -m venv --system-site-packages --without-pip "$work/venv" 2>&1); then
            line FAIL "install: $python -m venv failed: ${out##*$'\n'}"
            skip_rest "astraeus is not installed"; exit 1
        fi
        pip=("$python" -m pip --python "$py")
    else
        pip=("$py" -m pip)
    fi
    if ! out=$(timeout 150 "${pip[@]}" install --quiet --disable-pip-version-check --no-index \
            --find-links "$wheels" astraeus 2>&1); then
        line FAIL "install: pip install --no-index --find-links $wheels astraeus failed: ${out##*$'\n'}"
        skip_rest "astraeus is not installed"; exit 1
    fi
    line ok "install: $("$py" -c 'import importlib.metadata as m; print("astraeus", m.version("astraeus"))') into a venv over $python"
fi

mkdir -m 700 "$home"
cat > "$home/config.toml" <<'TOML'
[machine]
executor = "process"
gpus = "auto"
telemetry_seconds = 1
stop_grace_seconds = 2
TOML
export ASTRAEUS_HOME=$home ASTRAEUS_SOCKET=$socket
export ASTRAEUS_SIM_GPUS=0  # no NVML: no GPUs at all, never simulated ones mistaken for real
"$py" -m astraeus_tui.cli.main serve >"$home/serve.log" 2>&1 </dev/null &
daemon_pid=$!
started=0
for _ in $(seq 200); do  # 20 s
    kill -0 "$daemon_pid" 2>/dev/null || break
    if [ -S "$socket" ] && timeout 10 "$py" -m astraeus_tui.cli.main ls >/dev/null 2>&1; then
        started=1; break
    fi
    sleep 0.1
done
if [ "$started" = 0 ]; then
    line FAIL "daemon: did not answer on $socket in 20 s: $(tail -n 1 "$home/serve.log" 2>/dev/null)"
    skip_rest "no daemon"; exit 1
fi
line ok "daemon: pid $daemon_pid on $socket (process executor, gpus = \"auto\")"

args=(--home "$home" --socket "$socket" --work "$work" --budget "$budget")
[ -n "$docker_image" ] && args+=(--docker-image "$docker_image")
# --foreground: a Ctrl-C reaches the checks, which cancel their runs; the trap does the rest
timeout --foreground -k 10 $((budget + 30)) "$py" "$here/checks.py" "${args[@]}"
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    line FAIL "checks: past their budget of $budget s; stopped"
fi
[ "$rc" = 0 ] && exit 0
exit 1
