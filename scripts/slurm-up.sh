#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (Debian's slurm-wlm 22.05, cgroup v1 hybrid host, no
# systemd): install slurm-wlm and munge, write the configs, start munged, slurmctld and slurmd and
# wait for the node to be idle. Safe to run again (up → exits 0 at once). `--down` stops it all.
# Finished jobs: `scontrol show job` keeps them MinJobAge (300 s); after that the jobcomp file
# (/var/log/slurm/jobcomp.log) has one line per job (`sacct -c` reads it, not the array fields);
# plain sacct needs accounting, which is off. batch_sched_delay=0: a job queued while the CPUs
# are busy starts as soon as they free (with the default 3 s, once every 3 s: a one-second chunk
# took ~3 s a wave; benchmarks/jobs.py).
set -euo pipefail
conf=/etc/slurm/slurm.conf cgconf=/etc/slurm/cgroup.conf logs=/var/log/slurm
ctld_pid=/run/slurmctld.pid slurmd_pid=/run/slurmd.pid munge_pid=/run/munge/munged.pid

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
if [ "${1:-}" = --down ]; then
  stop "$slurmd_pid:slurmd" "$ctld_pid:slurmctld" "$munge_pid:munged"
  echo "slurm is down"; exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  t0=$(date +%s)
  # the recommends add ~30 dev/plugin packages that nothing here uses
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge
  echo "slurm-wlm installed in $(( $(date +%s) - t0 )) s"
fi

# the configs: one node (this host), its CPUs and ~95% of its memory; rewritten only on change
host=$(hostname -s)
cpus=$(getconf _NPROCESSORS_ONLN)
mem_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 95 / 100 / 1024 ))
new=$(mktemp) newcg=$(mktemp)
trap 'rm -f "$new" "$newcg"' EXIT
cat > "$new" <<EOF
# written by launcher's scripts/slurm-up.sh
ClusterName=launcher
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
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
    install -D -m 644 "${pair%%:*}" "${pair#*:}"; changed=1
  fi
done

up() {
  running "$munge_pid" munged && running "$ctld_pid" slurmctld && running "$slurmd_pid" slurmd \
    && timeout 5 sinfo -h -o %T 2>/dev/null | grep -qxE 'idle|mixed|allocated|completing'
}
if [ -z "$changed" ] && up; then echo "slurm is up"; exit 0; fi
[ -n "$changed" ] && stop "$slurmd_pid:slurmd" "$ctld_pid:slurmctld"

# on failure: what sinfo says and the daemons' last log lines
fail() {
  echo "$1; sinfo: $(sinfo -h -o '%T %E' 2>&1 | head -1)" >&2
  for f in "$logs/slurmctld.log" "$logs/slurmd.log" /var/log/munge/munged.log; do
    echo "--- $f" >&2; tail -n 20 "$f" >&2 2>/dev/null || true
  done
  exit 1
}
t0=$(date +%s)
# munge: a key of the munge user's own (Debian's postinst makes one), munged as that user
if [ ! -s /etc/munge/munge.key ]; then mungekey --create --keyfile /etc/munge/munge.key; fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
install -d -o munge -g munge -m 755 /run/munge
install -d -o munge -g munge -m 700 /var/lib/munge /var/log/munge
running "$munge_pid" munged || runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
munge -n | unmunge >/dev/null || fail "munge does not work"

install -d -o slurm -g slurm -m 755 /var/spool/slurmctld "$logs"
install -d -m 755 /var/spool/slurmd
touch "$logs/jobcomp.log"
chown slurm:slurm "$logs/jobcomp.log"
# both daemonize themselves (no -D); started from here they leave this shell's session
running "$ctld_pid" slurmctld || slurmctld </dev/null >/dev/null 2>&1 || fail "slurmctld failed"
running "$slurmd_pid" slurmd || slurmd </dev/null >/dev/null 2>&1 || fail "slurmd failed"
while [ $(( $(date +%s) - t0 )) -lt 60 ]; do
  case $(timeout 5 sinfo -h -o %T 2>/dev/null) in
    idle) echo "slurm is up: node $host idle after $(( $(date +%s) - t0 )) s"; exit 0 ;;
    # left drained or down by an earlier run (e.g. a step that could not be killed)
    drain*|down*) scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 0.5
done
fail "slurm did not come up in 60 s"
