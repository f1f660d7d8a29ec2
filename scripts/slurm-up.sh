#!/usr/bin/env bash
# A one-node Slurm cluster for the tests (Debian's slurm-wlm 22.05, cgroup v1 hybrid host, no
# systemd), private to this checkout: install slurm-wlm and munge where missing, write the
# configs, start munged (only where none answers), slurmctld and slurmd and wait for the node to
# be idle. A Slurm already on this machine is left alone: nothing under /etc/slurm, /etc/munge,
# /var/spool or /var/log is written, no daemon but its own is stopped.
#   - one folder holds it all (FOLDER below; LAUNCHER_SLURM_DIR names another): slurm.conf,
#     cgroup.conf (Slurm reads it beside the slurm.conf it was given), the controller's state,
#     slurmd's spool, the logs, the jobcomp file, the pid files, and munged's files if it starts one
#   - its daemons listen on the first two free ports from 16817 (not Slurm's 6817/6818) and are
#     started with -f FOLDER/slurm.conf; clients (sbatch, squeue, scontrol, sacct) find it through
#     SLURM_CONF=FOLDER/slurm.conf, which scripts/test.sh exports for pytest
# Usage: slurm-up.sh           up (exits 0 at once if it is up); prints the SLURM_CONF to export
#        slurm-up.sh --down    cancel its jobs, stop the daemons it started
#        slurm-up.sh --conf    print FOLDER/slurm.conf;   slurm-up.sh --status: exit 0 if up
# Finished jobs: `scontrol show job` keeps them MinJobAge (300 s); after that the jobcomp file
# (FOLDER/log/jobcomp.log) has one line per job (`sacct -c` reads it, not the array fields);
# plain sacct needs accounting, which is off. batch_sched_delay=0: a job queued while the CPUs
# are busy starts as soon as they free (with the default 3 s, once every 3 s: a one-second chunk
# took ~3 s a wave; benchmarks/jobs.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# FOLDER: one per checkout (a hash of its path), under $TMPDIR
dir=${LAUNCHER_SLURM_DIR:-${TMPDIR:-/tmp}/launcher-slurm-$(printf %s "$root" | sha1sum | cut -c1-8)}
conf=$dir/slurm.conf cgconf=$dir/cgroup.conf logs=$dir/log
ctld_pid=$dir/slurmctld.pid slurmd_pid=$dir/slurmd.pid
mdir=$dir/munge munge_pid=$dir/munge/munged.pid munge_sock=$dir/munge/munge.socket
export SLURM_CONF=$conf  # for sinfo, scontrol, squeue, scancel below and the daemons

# stop the daemons that pidfile:name pairs name (if alive and so named), all at once; wait <= 10 s
stop() {
  local pair pid pids=()
  for pair in "$@"; do
    pid=$(cat "${pair%%:*}" 2>/dev/null) || continue
    if [ -n "$pid" ] && [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = "${pair#*:}" ]; then
      kill "$pid" && pids+=("$pid")
    fi
    rm -f "${pair%%:*}"
  done
  for _ in $(seq 1 100); do
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=; done
    [ -z "$pid" ] && break; sleep 0.1
  done
}
running() {  # pidfile name
  local pid
  pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = "$2" ]
}
# the cgroups slurmd makes for its jobs: slurm_NODE (Debian's build; slurm on others) in each
# v1 controller, then uid_U/job_ID/step_S
slurm_cgroups() {
  compgen -G "/sys/fs/cgroup/*/slurm_$(hostname -s)" || compgen -G '/sys/fs/cgroup/*/slurm'
}
up() {
  running "$ctld_pid" slurmctld && running "$slurmd_pid" slurmd \
    && timeout 5 sinfo -h -o %T 2>/dev/null | grep -qxE 'idle|mixed|allocated|completing'
}
case ${1:-} in
  --conf) echo "$conf"; exit 0 ;;
  --status) up; exit ;;
  --down)
    # its jobs first: slurmd leaves a job's slurmstepd running when it stops
    if running "$ctld_pid" slurmctld; then
      ids=$(timeout 5 squeue -h -o %i 2>/dev/null || true)
      if [ -n "$ids" ]; then
        # shellcheck disable=SC2086  # one id a word
        scancel $ids 2>/dev/null || true
        for _ in $(seq 1 100); do
          [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1
        done
      fi
    fi
    stop "$slurmd_pid:slurmd" "$ctld_pid:slurmctld" "$munge_pid:munged"
    # the slurm cgroups its slurmd made (none was there before): removed where empty
    if [ -e "$dir/cgroups-made" ]; then
      for d in $(slurm_cgroups); do
        find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      done
      rm -f "$dir/cgroups-made"
    fi
    echo "slurm is down ($dir)"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--down | --conf | --status]" >&2; exit 2 ;;
esac

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  t0=$(date +%s)
  # the recommends add ~30 dev/plugin packages that nothing here uses
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge
  echo "slurm-wlm installed in $(( $(date +%s) - t0 )) s"
fi

install -d -m 755 "$dir"
[ -O "$dir" ] || { echo "$dir is not $(id -un)'s: set LAUNCHER_SLURM_DIR" >&2; exit 1; }

# munge: its own munged if it started one (still up), else a munged that answers at the default
# socket (the system's, used as it is), else it starts its own: key, socket, pid, log and seed in
# FOLDER/munge, as the munge user; slurm.conf's AuthInfo then points Slurm at that socket
own_munge=
if running "$munge_pid" munged; then own_munge=1
elif ! { munge -n | unmunge; } >/dev/null 2>&1; then own_munge=1
fi
authinfo=${own_munge:+AuthInfo=socket=$munge_sock}

# ports: those in use by its slurm.conf while it is up, else the first two free from 16817
old_ports=$(sed -n 's/^Slurm\(ctld\|d\)Port=//p' "$conf" 2>/dev/null | tr '\n' ' ' || true)
if up; then ports=$old_ports
else
  ports=$(python3 - $old_ports <<'EOF'
import socket, sys
def free(port):
    with socket.socket() as s:  # as Slurm binds: any address, SO_REUSEADDR
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
        return True
old = [int(p) for p in sys.argv[1:]]
pick = old if len(old) == 2 and all(map(free, old)) else []
port = 16817
while len(pick) < 2:
    if port not in old and free(port):
        pick.append(port)
    port += 1
print(*pick)
EOF
  )
fi
read -r ctld_port slurmd_port <<<"$ports"

# the configs: one node (this host), its CPUs and ~95% of its memory; rewritten only on change
host=$(hostname -s)
cpus=$(getconf _NPROCESSORS_ONLN)
mem_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 95 / 100 / 1024 ))
new=$(mktemp) newcg=$(mktemp)
trap 'rm -f "$new" "$newcg"' EXIT
cat > "$new" <<EOF
# written by launcher's scripts/slurm-up.sh (SLURM_CONF=$conf)
ClusterName=launcher
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=slurm
AuthType=auth/munge
$authinfo
MpiDefault=none
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$ctld_pid
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$logs/jobcomp.log
# a job's cgroups (slurm_cgroups above) are shared with another slurmd of this node name on this
# host: ids from 7000000 keep clear of another cluster's jobs
FirstJobId=7000000
# without --mem a job would get the whole node: give it its CPUs' share instead
DefMemPerCPU=$(( mem_mb / cpus ))
MailProg=/bin/true
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
# 22.05 autodetects v1 on a hybrid host; say so anyway. No swap limit: ConstrainRAMSpace only.
cat > "$newcg" <<EOF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=yes
EOF
changed=
for pair in "$new:$conf" "$newcg:$cgconf"; do
  if ! cmp -s "${pair%%:*}" "${pair#*:}"; then
    install -m 644 "${pair%%:*}" "${pair#*:}"; changed=1
  fi
done

ready() { echo "slurm is up: SLURM_CONF=$conf ($1)"; }
if [ -z "$changed" ] && up; then ready "ports $ctld_port, $slurmd_port"; exit 0; fi
[ -n "$changed" ] && stop "$slurmd_pid:slurmd" "$ctld_pid:slurmctld"

# on failure: what sinfo says and the daemons' last log lines
fail() {
  echo "$1; sinfo: $(sinfo -h -o '%T %E' 2>&1 | head -1)" >&2
  for f in "$logs/slurmctld.log" "$logs/slurmd.log" "$mdir/munged.log"; do
    echo "--- $f" >&2; tail -n 20 "$f" >&2 2>/dev/null || true
  done
  exit 1
}
t0=$(date +%s)
if [ -n "$own_munge" ] && ! running "$munge_pid" munged; then
  install -d -o munge -g munge -m 755 "$mdir"  # munged refuses a socket folder others may write
  [ -s "$mdir/munge.key" ] || mungekey --create --keyfile "$mdir/munge.key"
  chown munge:munge "$mdir/munge.key"
  chmod 400 "$mdir/munge.key"
  runuser -u munge -- munged --key-file="$mdir/munge.key" --socket="$munge_sock" \
    --pid-file="$munge_pid" --log-file="$mdir/munged.log" --seed-file="$mdir/munged.seed" \
    || fail "munged did not start"
fi
{ munge ${own_munge:+-S "$munge_sock"} -n | unmunge ${own_munge:+-S "$munge_sock"}; } >/dev/null \
  || fail "munge does not work"

install -d -o slurm -g slurm -m 755 "$dir/state" "$logs"
install -d -m 755 "$dir/spool"
touch "$logs/jobcomp.log"
chown slurm:slurm "$logs/jobcomp.log"
# no slurm cgroup yet and no other slurmd: the ones this slurmd makes go again on --down
if ! pgrep -x slurmd >/dev/null && ! slurm_cgroups >/dev/null; then
  touch "$dir/cgroups-made"
fi
# both daemonize themselves (no -D); started from here they leave this shell's session
running "$ctld_pid" slurmctld || slurmctld -f "$conf" </dev/null >/dev/null 2>&1 \
  || fail "slurmctld failed"
running "$slurmd_pid" slurmd || slurmd -f "$conf" </dev/null >/dev/null 2>&1 \
  || fail "slurmd failed"
while [ $(( $(date +%s) - t0 )) -lt 60 ]; do
  case $(timeout 5 sinfo -h -o %T 2>/dev/null) in
    idle) ready "node $host idle after $(( $(date +%s) - t0 )) s, ports $ctld_port, $slurmd_port"
          exit 0 ;;
    # left drained or down by an earlier run (e.g. a step that could not be killed)
    drain*|down*) scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 0.5
done
fail "slurm did not come up in 60 s"
