#!/usr/bin/env bash
# A GPU inside a container with launcher's own Podman engine, on a GPU host with no Docker, no
# registry and no network, as root, cgroup v2. Needs what scripts/podman-bundle.sh fetched:
# .debs/ (Debian's Podman 4.3, crun, conmon, catatonit, their libraries) and .whl/.
#
#   bash scripts/gpu-podman-checks.sh [OUTDIR]       # on the GPU host ($OUT there)
#   QUICK=1 NOGPU=1 bash scripts/gpu-podman-checks.sh /tmp/pc    # a trial without a GPU
#
# The .debs are unpacked into /tmp/podroot (never /); Podman's configuration, storage (vfs) and
# state live under /tmp/podstate. A rootfs skeleton (empty folders, bin lib lib64 sbin linking
# into usr) becomes the image localhost/hostroot:skeleton; each container binds the host's /usr,
# /etc and /opt read-only, so the host's python, frameworks and driver libraries run in it.
# Every step has its own time limit and the next one runs whatever it did; the whole keeps
# inside BUDGET_S (default 480). OUTDIR gets log.txt, checks.txt (a line per check) and
# results.tgz (run folders, reports, Podman's configuration and logs).
#   CGPREP=0: leave the command's own cgroup as it is (no leaf move, no test cgroup below it)
#   EXTRA_VOLUMES="/work:/work:ro": more binds (a trial whose python lives elsewhere)
#   OCI_RUNTIME=runc: the host's runc instead of the carried crun (crun 1.8 refuses hybrid v1)
set -u
out=${1:-${OUT:-/tmp/gpu-podman-checks}}
budget=${BUDGET_S:-480}
P=/tmp/podroot S=/tmp/podstate IMG=localhost/hostroot:skeleton
R=$(mktemp -d)
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
t0=$SECONDS
echo "== facts"
cat /etc/os-release; ldd --version | head -1; uname -a
echo "/proc/self/cgroup:"; cat /proc/self/cgroup
own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
for d in "$own" "$(dirname "$own")" /sys/fs/cgroup; do
  echo "$d: controllers [$(cat "$d/cgroup.controllers" 2>/dev/null)] subtree [$(cat "$d/cgroup.subtree_control" 2>/dev/null)] procs $(wc -l <"$d/cgroup.procs" 2>/dev/null) memory.max $(cat "$d/memory.max" 2>/dev/null) pids.max $(cat "$d/pids.max" 2>/dev/null)"
done
ls /dev/nvidia* 2>&1 | tr '\n' ' '; echo
# a CUDA init on the host first: /dev/nvidia-uvm may only appear then (nvidia-modprobe), and a
# container gets only the nodes there are when it is created
[ -z "${NOGPU:-}" ] && timeout 60 python3 -c 'import ctypes; print("cuInit", ctypes.CDLL("libcuda.so.1").cuInit(0))' 2>&1
ls -l /dev/nvidia* 2>&1; ls /etc/cdi /var/run/cdi 2>&1
echo "ulimit -Sn $(ulimit -Sn) -Hn $(ulimit -Hn) -Su $(ulimit -Su) -Hu $(ulimit -Hu)"
nproc; command -v python3 podman docker crun runc conmon; python3 --version
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
mount | grep -E " / | /usr| /opt| /etc| /tmp" | head; df -h /tmp | tail -1

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || echo "wheels: install failed"
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
LA=(python3 -m launcher)
Q=(); [ -n "${QUICK:-}" ] && Q=(--quick)
G=(--gpus all); [ -n "${NOGPU:-}" ] && G=(--gpus none)

pack() {
  cp "$R/checks.txt" "$out/" 2>/dev/null
  cp -r "$S/conf" "$R/" 2>/dev/null
  # shellcheck disable=SC2046
  tar czf "$out/results.tgz" -C "$PWD" $(cd "$PWD" && ls -d runs/pod-* 2>/dev/null) -C "$R" . 2>/dev/null || true
}
check() { echo "$*" | tee -a "$R/checks.txt"; }
step() {  # step NAME SECONDS CMD...: run CMD under a limit, unless the budget is spent
  local name=$1 limit=$2; shift 2
  local left=$((budget - (SECONDS - t0)))
  if (( left < 15 )); then echo "== $name: skipped (budget spent)"; check "$name skipped"; return 1; fi
  (( limit > left )) && limit=$left
  echo "== $name ($(( SECONDS - t0 ))s in, limit ${limit}s): $*"
  local s=$SECONDS rc
  if [ "$(type -t "$1")" = function ]; then "$@"; rc=$?  # its commands have their own limits
  else timeout -k 5 "$limit" "$@"; rc=$?; fi
  echo "== $name: exit $rc after $(( SECONDS - s ))s"
  check "$name exit=$rc seconds=$(( SECONDS - s ))"
  pack
  return $rc
}

# ---- Podman from the .debs, under /tmp only
setup_podman() {
  rm -rf "$P" && mkdir -p "$P/wrap" "$P/usr/lib/cni" "$S/conf" "$S/run" || return 1
  for f in .debs/*.deb; do dpkg -x "$f" "$P" || return 1; done
  local libs=$P/usr/lib/x86_64-linux-gnu:$P/lib/x86_64-linux-gnu
  for b in podman conmon crun; do  # the carried libraries for these alone, not for python
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/usr/bin/%s "$@"\n' \
      "$libs" "$P" "$b" >"$P/wrap/$b"
    chmod +x "$P/wrap/$b"
    LD_LIBRARY_PATH=$libs ldd "$P/usr/bin/$b" | grep "not found" && check "ldd $b: a library is missing"
  done
  cat >"$S/conf/containers.conf" <<EOF
[containers]
netns = "none"
init_path = "$P/usr/bin/catatonit"
seccomp_profile = "$P/usr/share/containers/seccomp.json"
env = ["PATH=$CPATH"]
log_driver = "k8s-file"
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$S/events.log"
conmon_path = ["$P/wrap/conmon"]
helper_binary_dir = ["$P/usr/libexec/podman", "$P/usr/lib/podman"]
runtime = "$RT"
tmp_dir = "$S/run/libpod"
volume_path = "$S/volumes"
[engine.runtimes]
$RT = ["$RT_PATH"]
[network]
network_config_dir = "$S/net"
cni_plugin_dirs = ["$P/usr/lib/cni"]
EOF
  cat >"$S/conf/storage.conf" <<EOF
[storage]
driver = "vfs"
runroot = "$S/runroot"
graphroot = "$S/graph"
EOF
  echo 'unqualified-search-registries = []' >"$S/conf/registries.conf"
  echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$S/conf/policy.json"
  if [ ! -e /etc/containers/policy.json ]; then  # `podman import` reads it; no other way to name one
    mkdir -p /etc/containers && cp "$S/conf/policy.json" /etc/containers/policy.json &&
      check "wrote /etc/containers/policy.json (none there)"
  fi
}
CPATH=$(dirname "$(command -v python3)"):/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RT=${OCI_RUNTIME:-crun} RT_PATH=$P/wrap/crun  # OCI_RUNTIME=runc: a trial on a cgroup v1 host (crun 1.8 refuses hybrid)
[ "$RT" = crun ] || RT_PATH=$(command -v "$RT")
export CONTAINERS_CONF=$S/conf/containers.conf CONTAINERS_STORAGE_CONF=$S/conf/storage.conf \
  CONTAINERS_REGISTRIES_CONF=$S/conf/registries.conf PATH=$P/wrap:$PATH

make_image() {  # the skeleton, with PATH and LD_LIBRARY_PATH for the host's python and driver
  local sk=$S/skeleton
  rm -rf "$sk" && mkdir -p "$sk" && cd "$sk" || return 1
  mkdir -p usr etc opt proc sys dev run root home mnt srv var/tmp tmp && chmod 1777 tmp var/tmp
  for l in bin lib lib64 sbin; do ln -s "usr/$l" "$l"; done
  tar cf "$S/skeleton.tar" . && cd - >/dev/null || return 1
  local ch=(--change "ENV PATH=$CPATH")
  local ld=${LD_LIBRARY_PATH:-}
  [ -n "$ld" ] && ch+=(--change "ENV LD_LIBRARY_PATH=$ld")
  timeout 30 podman rmi -f "$IMG" >/dev/null 2>&1
  timeout 50 podman import "${ch[@]}" "$S/skeleton.tar" "$IMG" && timeout 20 podman image inspect "$IMG" --format '{{.Config.Env}}'
}

gpu_devs=()
for d in /dev/nvidia*; do [ -c "$d" ] && gpu_devs+=(--device "$d:$d:rwm"); done
[ -n "${NOGPU:-}" ] && gpu_devs=()
VOLS=(--volume /usr:/usr:ro --volume /etc:/etc:ro --volume /opt:/opt:ro)
# launcher mounts itself at /opt/launcher/{launcher,entrypoint.py}: inside the read-only /opt
# the OCI runtime cannot make those mount points, so they are made on the host (else each
# entry of /opt is bound apart, and /opt/launcher is the image's own, writable)
made_opt=""
if [ ! -e /opt/launcher ] && mkdir -p /opt/launcher/launcher 2>/dev/null && touch /opt/launcher/entrypoint.py; then
  made_opt=1; check "made the mount points /opt/launcher/{launcher,entrypoint.py} on the host"
elif [ ! -d /opt/launcher/launcher ] || [ ! -e /opt/launcher/entrypoint.py ]; then
  VOLS=(--volume /usr:/usr:ro --volume /etc:/etc:ro)
  for o in /opt/*; do [ "$o" = /opt/launcher ] || VOLS+=(--volume "$o:$o:ro"); done
  check "/opt not writable: each of its entries bound apart"
fi
for v in ${EXTRA_VOLUMES:-}; do VOLS+=(--volume "$v"); done

raw_run() {  # plain podman, launcher aside: what the engine and the binds give
  local nproc; nproc=$(ulimit -Su | sed s/unlimited/32768/); (( nproc > 32768 )) && nproc=32768  # Podman's own
  timeout -k 5 80 podman run --rm --pull=never --network none --pids-limit -1 \
    --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc" \
    "${gpu_devs[@]}" "${VOLS[@]}" "$@" "$IMG" sh -c \
    'cat /proc/self/cgroup; echo "pids.max $(cat /sys/fs/cgroup/pids.max 2>&1)"; grep -E "processes|open files" /proc/self/limits; command -v python3; (nvidia-smi -L || true) 2>&1; python3 -c "import jax; print(jax.devices())" 2>&1 | tail -2'
}

summary() {  # summary RUN_ID: peak, estimate, enforcement, GPUs, diagnosis
  python3 - "$1" <<'EOF' | tee -a "$R/checks.txt"
import json, sys
from pathlib import Path
run = Path("runs") / sys.argv[1]
try:
    s = json.loads((run / "summary.json").read_text())
except OSError as exc:
    print(f"{sys.argv[1]}: no summary ({exc.strerror})"); sys.exit()
try:
    t, p = s["peaks"]["threads"], s["peaks"]["pids_current"]
    est = s["threads_estimate"]["total"]
    gpus = "; ".join(f"GPU {g['gpu']} util {g['util_peak_percent']}% mem {g['memory_percent']}%"
                     for g in s.get("gpus") or [])
    print(f"{sys.argv[1]}: exit {s['exit_status']}, sampled peak {t['peak']}, kernel pids.peak "
          f"{p.get('kernel_peak')}, estimate {est} ({s['threads_estimate']['source']}); enforced "
          f"{s['engine'].get('enforced')}; advisory {s['engine'].get('advisory')}; "
          f"gpus [{gpus}]; {s['diagnosis']}")
except (KeyError, TypeError) as exc:
    print(f"{sys.argv[1]}: summary without {exc}: {sorted(s)}")
EOF
}

estimate() {  # the threads launcher expects for the run (podman's dry run, else native's)
  local n
  n=$(timeout 60 "${LA[@]}" run --runtime podman --image "$IMG" "${VOLS[@]}" "${G[@]}" --dry-run --json "$@" 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["threads_estimate"]["total"])' 2>/dev/null)
  [ -n "$n" ] || n=$(timeout 60 "${LA[@]}" run --runtime native "${G[@]}" --dry-run --json "$@" | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["threads_estimate"]["total"])')
  echo "${n:-1}"
}

cgprep() {  # the command's own cgroup: its processes into a leaf, a test cgroup beside it
  [ "${CGPREP:-1}" = 0 ] && { check "cgprep: off"; return 1; }
  [ -f /sys/fs/cgroup/cgroup.controllers ] || { check "cgprep: not cgroup v2"; return 1; }
  [ "$own" = /sys/fs/cgroup/ ] && { check "cgprep: own cgroup is the root"; return 1; }
  mkdir -p "$own/cmd-leaf" || return 1
  for p in $(cat "$own/cgroup.procs"); do echo "$p" >"$own/cmd-leaf/cgroup.procs" || check "cgprep: cannot move $p ($(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-60))"; done
  local c ok=()
  for c in $(cat "$own/cgroup.controllers"); do echo "+$c" >"$own/cgroup.subtree_control" 2>/dev/null && ok+=("$c"); done
  T=$own/podtest; mkdir -p "$T" "$own/podraw" || return 1
  [ -f "$own/memory.max" ] && cat "$own/memory.max" >"$T/memory.max" && cat "$own/memory.max" >"$own/podraw/memory.max"
  check "cgprep: $own processes in cmd-leaf, enabled [${ok[*]}]; test cgroup $T: controllers [$(cat "$T/cgroup.controllers")] memory.max $(cat "$T/memory.max" 2>/dev/null)"
}

RUN=("${LA[@]}" run --runtime podman --image "$IMG" "${VOLS[@]}" "${G[@]}" --interval 0.05)
JAX=(stress-jax --phase 1 --max-runs 2 "${Q[@]}")

step setup 60 setup_podman || { check "setup failed"; }
check "podman: $(command -v podman) -> $(podman --version 2>&1); runtime $RT_PATH"
step podman-info 60 podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Version}} cgroups {{.Host.CgroupsVersion}} {{.Host.CgroupManager}} ctrl {{.Host.CgroupControllers}} store {{.Store.GraphDriverName}}'
step image 60 make_image
"${LA[@]}" plan -f jax --json >"$R/plan-jax.json" 2>&1
step dry-run 60 "${RUN[@]}" --dry-run "${JAX[@]}" | tee "$R/dry-run.txt"

# launcher runs in a test cgroup under the command's own (whose processes, the runner's too, move
# into a leaf first): crun enables controllers on each level down to the container's, and
# fails (EBUSY) at one that holds a process, as the command's own cgroup does
T=""
cgprep || T=""
INT=()
inT() {  # INT: a command prefix that starts in a fresh test cgroup of its own under the command's
  [ -n "$T" ] || return 0  # (a run's background plot may outlive it: no run shares a cgroup)
  local d=$own/pod-$1; mkdir -p "$d" && cat "$own/memory.max" >"$d/memory.max" 2>/dev/null
  INT=(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$d")
}
# plain podman, launcher aside, under T (never under the command's own cgroup while it holds
# processes: crun then turns it threaded, and its memory controller is gone for good)
# (in a sibling of T: Podman enables controllers in the parent for conmon's cgroup, and T must
# stay a leaf, launcher's alone, for launcher's own leaf move)
if [ -n "$T" ]; then step raw-podman-under-own 90 raw_run --cgroup-parent "${own#/sys/fs/cgroup}/podraw"
else step raw-podman 90 raw_run; fi

# (a) the thread budget against the peak, (b) GPU telemetry: a container with no limit asked
inT plain; step pod-plain 150 "${INT[@]}" "${RUN[@]}" --name pod-plain "${JAX[@]}"; summary pod-plain

# (c) the stress test under a pids limit (the estimate), --require-limits: enforced or refused
n=$(estimate "${JAX[@]}"); printf 'extends: auto\nlimits: {pids: %s}\n' "$n" >"$R/pids-est.yaml"
check "pids-est: limits.pids $n"
inT pids-est; step pod-pids-est 150 "${INT[@]}" "${RUN[@]}" --require-limits --profile "$R/pids-est.yaml" --name pod-pids-est "${JAX[@]}"
summary pod-pids-est
[ -n "$T" ] && check "pod-pids-est's cgroup after: pids.peak $(cat "$own/pod-pids-est/pids.peak" 2>/dev/null) memory.peak $(cat "$own/pod-pids-est/memory.peak" 2>/dev/null); below it: $(ls -d "$own/pod-pids-est"/*/ 2>/dev/null | xargs -n1 basename 2>/dev/null | tr '\n' ' ')"
# a pids limit below the peak (report 002's 100), without --require-limits: what is said
printf 'extends: auto\nlimits: {pids: 100}\n' >"$R/pids-100.yaml"
# refused as it stands (the estimate is above 100): --fit runs it on fewer CPUs, and the
# informed override runs it as it is, under the same limit
inT pids-100; step pod-pids-100 150 "${INT[@]}" "${RUN[@]}" --profile "$R/pids-100.yaml" --name pod-pids-100 "${JAX[@]}"; summary pod-pids-100
inT pids-100-fit; step pod-pids-100-fit 150 "${INT[@]}" "${RUN[@]}" --fit --profile "$R/pids-100.yaml" --name pod-pids-100-fit "${JAX[@]}"; summary pod-pids-100-fit
inT pids-100-override; step pod-pids-100-override 150 "${INT[@]}" "${RUN[@]}" --override --profile "$R/pids-100.yaml" --name pod-pids-100-override "${JAX[@]}"; summary pod-pids-100-override
for n in pod-plain pod-pids-100-override; do "${LA[@]}" report "runs/$n" >"$R/report-$n.txt" 2>&1; done

for d in runs/pod-*/; do [ -f "$d/summary.json" ] && "${LA[@]}" report "$d" >"$R/report-$(basename "$d").txt" 2>&1; done
podman ps -a >"$R/podman-ps.txt" 2>&1
cp "$S/events.log" "$R/" 2>/dev/null
find /sys/fs/cgroup -name 'libpod*' -o -name 'launcher-*' 2>/dev/null | head >"$R/cgroups-left.txt"
for d in /sys/fs/cgroup "$(dirname "$own")" "$own" "$own"/pod-*; do
  echo "$d: controllers [$(cat "$d/cgroup.controllers" 2>/dev/null)] subtree [$(cat "$d/cgroup.subtree_control" 2>/dev/null)] procs $(wc -l <"$d/cgroup.procs" 2>/dev/null)"
done | tee -a "$R/checks.txt"
[ -n "$made_opt" ] && rm -rf /opt/launcher
echo "== done in $(( SECONDS - t0 ))s"
cat "$R/checks.txt"
pack
