#!/usr/bin/env bash
# Prove the SLURM profile against a real one-node SLURM cluster on this machine.
#
#   make test-slurm            (or: bash tests/slurm/run.sh)
#
# 1. installs Debian's slurm-wlm and munge when missing (apt-get update once first; root);
# 2. starts munged, slurmctld and slurmd on loopback only, with every file (config, keys,
#    state, logs, pid files) under $SLURM_TEST_STATE (default /var/tmp/dpcounts-slurm-test);
# 3. runs tests/slurm/check_slurm_run.py: the tiny config through workflow/profiles/slurm
#    and through the local default profile, in two throw-away copies of the project, and
#    checks that the jobs went through sbatch (slurmctld's job-completion log) and that
#    results/ and figures/ are the same bytes;
# 4. tears the cluster down on every exit (success, failure, Ctrl-C, timeout): the daemons
#    it started are stopped by the pids in their pid files, nothing else is touched.
#
# No accounting database (slurmdbd) is configured: the executor plugin is told to use
# `squeue` for job status (--slurm-status-command squeue, reliable because MinJobAge=300
# keeps finished jobs visible to squeue for 5 minutes) and --slurm-no-account (there are no
# accounts to validate). Jobs finished are recorded by jobcomp/filetxt instead.
#
# The whole run is bounded by SLURM_TEST_TIMEOUT seconds (default 1800); running it again
# first stops whatever an earlier interrupted run left behind (by its pid files).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
STATE="${SLURM_TEST_STATE:-/var/tmp/dpcounts-slurm-test}"
TIMEOUT="${SLURM_TEST_TIMEOUT:-1800}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
CTLD_PORT="${SLURM_TEST_CTLD_PORT:-6817}"
SLURMD_PORT="${SLURM_TEST_SLURMD_PORT:-6818}"
SYSTEM_CONF=/etc/slurm/slurm.conf

log() { printf '[test-slurm %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# Stop one daemon by the pid in its pid file, if that pid is alive and is that daemon.
stop_daemon() {
    local name=$1 pidfile=$2 pid
    [ -f "$pidfile" ] || return 0
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q "$name" "/proc/$pid/comm" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
        if [ -d "/proc/$pid" ]; then
            log "$name ($pid) ignored SIGTERM; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pidfile"
}

# Every process this test starts carries DPCOUNTS_SLURM_TEST=$STATE in its environment
# (set on the daemons and on the check, not on this shell): the daemons, slurmstepd, the
# snakemake runs and the jobs they submit. Stop those still running, by pid.
stop_marked() {
    local environ pid
    for environ in /proc/[0-9]*/environ; do
        pid="${environ#/proc/}"
        pid="${pid%/environ}"
        [ "$pid" = "$$" ] && continue
        # (processes come and go while we look: read errors are expected and ignored)
        if { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qxF "DPCOUNTS_SLURM_TEST=$STATE"; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
}

teardown() {
    # Cancel what is still queued or running while the controller can still do it.
    if [ -f "$STATE/slurmctld.pid" ] && [ -f "$STATE/slurm.conf" ]; then
        local jobs
        jobs="$(SLURM_CONF="$STATE/slurm.conf" timeout 10 squeue -h -o %i 2>/dev/null || true)"
        if [ -n "$jobs" ]; then
            log "cancelling leftover jobs: $(echo $jobs)"
            # shellcheck disable=SC2086
            SLURM_CONF="$STATE/slurm.conf" timeout 10 scancel $jobs 2>/dev/null || true
            for _ in $(seq 1 30); do
                [ -z "$(SLURM_CONF="$STATE/slurm.conf" timeout 10 squeue -h -o %i \
                    2>/dev/null || true)" ] && break
                sleep 1
            done
        fi
    fi
    stop_marked
    # Wait for the daemons (SIGKILL after 10 s): slurmd, the controller, then munge.
    stop_daemon slurmd "$STATE/slurmd.pid"
    stop_daemon slurmctld "$STATE/slurmctld.pid"
    stop_daemon munged "$STATE/munge/munged.pid"
    if [ "$(readlink "$SYSTEM_CONF" 2>/dev/null || true)" = "$STATE/slurm.conf" ]; then
        rm -f "$SYSTEM_CONF"
    fi
}

if [ "${1:-}" = "--teardown" ]; then
    teardown
    exit 0
fi

# Outer layer: the hard timeout around everything, then a teardown that runs even when
# the inner run had to be killed.
if [ -z "${_DPCOUNTS_SLURM_INNER:-}" ]; then
    export _DPCOUNTS_SLURM_INNER=1
    rc=0
    timeout --signal=TERM --kill-after=30 "$TIMEOUT" bash "${BASH_SOURCE[0]}" "$@" || rc=$?
    teardown
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        log "FAILED: hard timeout of ${TIMEOUT}s reached"
    fi
    exit "$rc"
fi

show_logs() {
    for f in "$STATE"/logs/*.log; do
        [ -s "$f" ] && { log "tail of $f:"; tail -n 15 "$f" >&2; }
    done
    return 0
}
trap 'rc=$?; [ "$rc" -ne 0 ] && show_logs; teardown' EXIT
trap 'exit 143' TERM INT

if [ "$(id -u)" -ne 0 ]; then
    log "must run as root (it installs Debian packages and starts the SLURM daemons)"
    exit 1
fi

# --- 1. install -------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurm-wlm and munge from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurm-wlm munge >/dev/null
fi
log "$(slurmctld -V)"

# --- 2. configure and start -------------------------------------------------------------
teardown  # whatever an interrupted earlier run left running
rm -rf "$STATE"
mkdir -p "$STATE"/{munge,ctld,spool,logs}
# munged wants its socket folder searchable by all; the key itself is 0400.
chmod 755 "$STATE" "$STATE/munge"

HOST="$(hostname -s)"
# The node's real hardware as slurmd sees it (CPUs, sockets, cores, memory), so the node
# is not drained for a mismatch; RealMemory is lowered by 10% to leave headroom.
NODE_LINE="$(slurmd -C | head -n 1)"
MEM="$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")"
NODE_LINE="$(sed "s/RealMemory=[0-9]*/RealMemory=$((MEM * 9 / 10))/" <<<"$NODE_LINE")"

dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$STATE/munge/munge.key"
SOCKET="$STATE/munge/munge.socket"

cat >"$STATE/slurm.conf" <<CONF
# One-node test cluster written by tests/slurm/run.sh; loopback only.
ClusterName=dpcountstest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/logs/slurmctld.log
SlurmdLogFile=$STATE/logs/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=300
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/logs/jobcomp.log
$NODE_LINE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$STATE/slurm.conf"
# snakemake-executor-plugin-slurm-jobstep strips SLURM_CONF (with every SLURM_* variable it
# does not know) from the environment of the srun it starts inside a batch job, so srun
# only finds a config at the compiled-in default path. Link ours there for the run; an
# existing file that is not our link is left alone and the run refuses to go on.
if [ -e "$SYSTEM_CONF" ] || [ -L "$SYSTEM_CONF" ]; then
    if [ "$(readlink "$SYSTEM_CONF" || true)" != "$SLURM_CONF" ]; then
        log "$SYSTEM_CONF exists and is not this test's; refusing to replace it"
        exit 1
    fi
fi
mkdir -p "$(dirname "$SYSTEM_CONF")"
ln -sfn "$SLURM_CONF" "$SYSTEM_CONF"

log "starting munged, slurmctld, slurmd (state in $STATE)"
DPCOUNTS_SLURM_TEST="$STATE" munged --force --key-file="$STATE/munge/munge.key" --socket="$SOCKET" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/logs/munged.log" \
    --seed-file="$STATE/munge/munged.seed"
DPCOUNTS_SLURM_TEST="$STATE" slurmctld -f "$SLURM_CONF"
DPCOUNTS_SLURM_TEST="$STATE" slurmd -f "$SLURM_CONF"

# Wait until the node is idle (or give up after 60 s and show why).
for i in $(seq 1 60); do
    state="$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)"
    [ "$state" = "idle" ] && break
    if [ "$i" -eq 60 ]; then
        log "node never became idle (state: '${state:-no answer}'); slurmctld log:"
        tail -n 30 "$STATE/logs/slurmctld.log" >&2 || true
        exit 1
    fi
    sleep 1
done
log "cluster up: $(sinfo -h -o '%P %a %D %T %c CPUs')"

# --- 3. the check -----------------------------------------------------------------------
DPCOUNTS_SLURM_TEST="$STATE" "$PYTHON" "$HERE/check_slurm_run.py" --jobcomp-log "$STATE/logs/jobcomp.log" \
    --slurmctld-log "$STATE/logs/slurmctld.log"
log "PASSED"
