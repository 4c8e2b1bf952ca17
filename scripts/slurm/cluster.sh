#!/usr/bin/env bash
# A one-host Slurm cluster for the Slurm test tier: slurmctld and slurmd on this machine, as root, with its own
# configuration, state and logs in one folder (default /tmp/kimi-slurm; KIMI_SLURM_DIR overrides).
#   bash scripts/slurm/cluster.sh start    install the OS packages if absent (apt-get), start munge, slurmctld and
#                                          slurmd, wait until the node is idle; prints `export SLURM_CONF=...`
#   bash scripts/slurm/cluster.sh stop     stop the daemons this script started (by their recorded pids)
# Needs root (a one-host cluster's daemons and `scontrol requeue` of any job). The node has this machine's CPUs;
# each core runs up to 4 jobs (OverSubscribe=FORCE:4), so a small array and its neighbours run side by side.
# AuthInfo=cred_expire=10: a requeued job waits 10 s before it runs again (Slurm's default is 120 s).
set -euo pipefail
dir=${KIMI_SLURM_DIR:-/tmp/kimi-slurm}
conf="$dir/slurm.conf"

install_packages() {
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
        || ! command -v munged >/dev/null; then
        echo "installing slurmctld slurmd slurm-client munge (apt-get) ..." >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >&2
    fi
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return    # a munged already answers
    fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        mkdir -p /etc/munge
        if command -v mungekey >/dev/null; then mungekey -c -f -k /etc/munge/munge.key; else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; fi
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    rm -f /run/munge/munged.pid
    su -s /bin/sh munge -c /usr/sbin/munged
    for _ in $(seq 50); do
        # The daemon's pid from its pid file, once it answers: the process su started exits at once (it forks
        # the daemon), so a pid found by name while it still ran would name a process that is gone.
        if munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && record munged /run/munge/munged.pid; then
            return
        fi
        # A munged that writes no pid file: the munge user's munged that still runs once it answers.
        if [[ ! -e /run/munge/munged.pid ]] && munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
            pgrep -u munge -x munged | while read -r pid; do
                if is_daemon munged "$pid"; then echo "$pid"; fi
            done > "$dir/munged.started"
            return
        fi
        sleep 0.2
    done
    echo "error: munged did not start" >&2
    exit 1
}

# Record the pid in pid file $2 as daemon $1's (in $dir/$1.started) when that process runs and is $1.
record() {
    local pid
    pid=$(cat "$2" 2>/dev/null || true)
    if [[ "$pid" =~ ^[0-9]+$ ]] && is_daemon "$1" "$pid"; then
        echo "$pid" > "$dir/$1.started"
        return 0
    fi
    return 1
}

# Whether process $2 runs and is daemon $1 (a recorded pid that ended may be another process's by now).
is_daemon() { [[ "$(cat "/proc/$2/comm" 2>/dev/null)" == "$1" ]]; }

write_conf() {
    local host cpus
    host=$(hostname -s)
    cpus=$(nproc)
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    cat > "$conf" <<CONF
ClusterName=kimi
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MinJobAge=3600
KillWait=30
NodeName=$host CPUs=$cpus RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
}

start() {
    install_packages
    mkdir -p "$dir"
    start_munge
    write_conf
    export SLURM_CONF="$conf"
    if ! scontrol ping 2>/dev/null | grep -q "is UP"; then
        slurmctld -f "$conf"
        for _ in $(seq 100); do
            scontrol ping 2>/dev/null | grep -q "is UP" && record slurmctld "$dir/slurmctld.pid" && break
            sleep 0.2
        done
    fi
    if [[ -z "$(ours slurmd)" ]]; then
        slurmd -f "$conf"
        for _ in $(seq 50); do
            record slurmd "$dir/slurmd.pid" && break
            sleep 0.2
        done
    fi
    for _ in $(seq 150); do
        state=$(sinfo -h -o %T 2>/dev/null || true)
        if [[ "$state" == idle* || "$state" == mix* || "$state" == alloc* ]]; then
            echo "export SLURM_CONF=$conf"
            return
        fi
        sleep 0.2
    done
    echo "error: the Slurm node did not become idle (sinfo: ${state:-no answer}); logs in $dir/log" >&2
    exit 1
}

# The daemons started with this folder's configuration (their command line names it, so they are ours).
ours() { pgrep -f -x "$1 -f $conf" || true; }

stop() {
    for daemon in slurmd slurmctld munged; do
        if [[ -s "$dir/$daemon.started" ]]; then
            while read -r pid; do
                if is_daemon "$daemon" "$pid"; then kill "$pid" 2>/dev/null || true; fi
            done < "$dir/$daemon.started"
            rm -f "$dir/$daemon.started"
        fi
    done
    # A daemon may fork again after its pid was recorded: stop what still runs with this configuration.
    for _ in $(seq 50); do
        left=$(ours slurmctld; ours slurmd)
        [[ -z "$left" ]] && return
        kill $left 2>/dev/null || true
        sleep 0.2
    done
    echo "warning: Slurm daemons still running: $left" >&2
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) sed -n '2,9p' "$0"; exit 2 ;;
esac
