#!/usr/bin/env bash
# Start a real single-node Slurm for tests/slurm (run as root on Debian; idempotent).
#
#   1. install slurmctld, slurmd, slurm-client and munge when missing (apt-get);
#   2. make the munge key if there is none and start munged;
#   3. make 8 fake GPUs: character devices with /dev/null's numbers, named
#      nvidia0..7 in $STATE/dev (never in /dev), listed in gres.conf;
#   4. write /etc/slurm/slurm.conf and gres.conf for one node named after this
#      host, with two partitions (low, high) for preemption by partition
#      priority, and short scheduler intervals so tests are fast;
#   5. start slurmctld and slurmd in the background (no systemd), pid and log
#      files under $STATE, and wait until `sinfo` shows the node idle.
#
# A config this script did not write is never overwritten. Running it again
# with the same config leaves running daemons alone; a changed config restarts
# them. `tests/slurm/setup.sh --stop` stops the daemons it started.
#
# Exits non-zero with one clear line when something cannot be done.
set -euo pipefail

STATE="${ASTRAEUS_SLURM_STATE:-/var/lib/astraeus-slurm}"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
GRES_CONF="$CONF_DIR/gres.conf"
WAIT_SECONDS="${ASTRAEUS_SLURM_WAIT:-60}"
MARK="# Written by Astraeus's tests/slurm/setup.sh: a single-node Slurm for tests."
NODE_CPUS=16
NODE_MEMORY_MB=65536
NODE_GPUS=8

say() { echo "setup.sh: $*"; }
die() { echo "setup.sh: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run me as root (I install packages and start slurmctld)"

node_name() { hostname -s 2>/dev/null || echo localhost; }

install_packages() {
    local wanted=() pair
    for pair in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
        command -v "${pair%%:*}" >/dev/null || wanted+=("${pair#*:}")
    done
    [ "${#wanted[@]}" -eq 0 ] && return 0
    # Their maintainer scripts cannot start the services without an init system
    # (policy-rc.d says so harmlessly): this script starts them below.
    say "installing ${wanted[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${wanted[@]}"; } >/dev/null || die "installing ${wanted[*]} failed"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }

start_munge() {
    local key=/etc/munge/munge.key
    if [ ! -s "$key" ]; then
        say "creating the munge key"
        mungekey --create --keyfile="$key" || die "mungekey --create failed"
    fi
    chown munge:munge "$key" && chmod 0400 "$key"
    install -d -o munge -g munge -m 0755 /run/munge
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0
    fi
    say "starting munged"
    runuser -u munge -- munged --force || die "munged did not start; see /var/log/munge/munged.log"
    munge -n | unmunge >/dev/null || die "munge does not answer after starting munged"
}

make_fake_gpus() {
    install -d -m 0755 "$STATE/dev"
    local i
    for i in $(seq 0 $((NODE_GPUS - 1))); do
        local dev="$STATE/dev/nvidia$i"
        if [ ! -c "$dev" ]; then
            rm -f "$dev"
            mknod -m 0666 "$dev" c 1 3 || die "cannot make the fake GPU $dev (mknod)"
        fi
    done
}

write_config() {
    local node
    node="$(node_name)"
    cat <<EOF
$MARK
# One node, $node (127.0.0.1), with $NODE_GPUS fake GPUs; state in $STATE.
ClusterName=astraeus-test
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ReturnToService=2
# No cgroups here: processes are tracked through /proc, tasks are not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# No AccountingStorageTRES=gres/gpu: slurmctld refuses it without slurmdbd.
# The node may declare more CPUs and memory than the machine has.
SlurmdParameters=config_overrides
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job that asks no memory gets this much per CPU (not the whole node).
DefMemPerCPU=256
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_resolution=1,sched_min_interval=100000,bf_continue
PriorityType=priority/basic
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
# Seconds between SIGTERM and SIGKILL when a job is cancelled or ends its time.
KillWait=2
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
NodeName=$node NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=$NODE_MEMORY_MB Gres=gpu:$NODE_GPUS State=UNKNOWN
# Jobs in "high" preempt jobs in "low" (requeued after the partition's grace).
PartitionName=low Nodes=ALL Default=YES PriorityTier=1 MaxTime=INFINITE State=UP GraceTime=2 PreemptMode=REQUEUE
PartitionName=high Nodes=ALL Default=NO PriorityTier=10 MaxTime=INFINITE State=UP GraceTime=2 PreemptMode=OFF
EOF
}

write_gres() {
    echo "$MARK"
    echo "AutoDetect=off"
    echo "NodeName=$(node_name) Name=gpu File=$STATE/dev/nvidia[0-$((NODE_GPUS - 1))]"
}

# Write text $2 to file $1 when it differs, and set CHANGED.
CHANGED=""
install_file() {
    local path="$1" text="$2"
    if [ -f "$path" ] && ! grep -qF "$MARK" "$path"; then
        die "$path exists and was not written by this script; move it away first"
    fi
    if [ -f "$path" ] && [ "$(cat "$path")" = "$text" ]; then
        return 0
    fi
    printf '%s\n' "$text" >"$path.tmp" && mv "$path.tmp" "$path"
    CHANGED=1
}

stop_daemons() {
    local name pidfile
    for name in slurmd slurmctld; do
        pidfile="$STATE/$name.pid"
        if alive "$pidfile"; then
            say "stopping $name"
            kill "$(cat "$pidfile")"
            local waited=0
            while alive "$pidfile" && [ "$waited" -lt 20 ]; do
                sleep 0.5
                waited=$((waited + 1))
            done
            alive "$pidfile" && kill -9 "$(cat "$pidfile")"
        fi
        rm -f "$pidfile"
    done
}

start_daemons() {
    install -d -m 0755 "$STATE/ctld" "$STATE/spool"
    if ! alive "$STATE/slurmctld.pid"; then
        say "starting slurmctld (log: $STATE/slurmctld.log)"
        slurmctld -i || die "slurmctld did not start; see $STATE/slurmctld.log"
    fi
    if ! alive "$STATE/slurmd.pid"; then
        say "starting slurmd (log: $STATE/slurmd.log)"
        slurmd -N "$(node_name)" || die "slurmd did not start; see $STATE/slurmd.log"
    fi
}

node_state() { timeout 10 sinfo --noheader --node "$(node_name)" --format=%T 2>/dev/null | head -n1; }

wait_idle() {
    local deadline=$((SECONDS + WAIT_SECONDS)) state=""
    while :; do
        state="$(node_state || true)"
        case "$state" in
        idle | mixed | allocated) break ;;
        down* | drain* | fail*)
            scontrol update nodename="$(node_name)" state=resume >/dev/null 2>&1 || true ;;
        esac
        local name
        for name in slurmctld slurmd; do
            if ! alive "$STATE/$name.pid"; then
                tail -n 5 "$STATE/$name.log" >&2 || true
                die "$name stopped at once; see $STATE/$name.log"
            fi
        done
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 10 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
            die "the node is not up after ${WAIT_SECONDS}s (sinfo says '${state:-nothing}')"
        fi
        sleep 0.5
    done
    say "slurm is up: node $(node_name) is $state"
}

if [ "${1:-}" = "--stop" ]; then
    stop_daemons
    exit 0
fi

install_packages
start_munge
make_fake_gpus
install -d -m 0755 "$CONF_DIR" "$STATE"
install_file "$CONF" "$(write_config)"
install_file "$GRES_CONF" "$(write_gres)"
if [ -n "$CHANGED" ]; then
    stop_daemons
fi
start_daemons
wait_idle
