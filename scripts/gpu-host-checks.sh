#!/usr/bin/env bash
# Issue 14's checks on a GPU host with cgroup v2, natively, as root; what the README's
# "Measured on a GPU host" section reports came from this script.
#
#   bash scripts/gpu-host-checks.sh main [OUTDIR]     # runs, pids limits, calibrate, outer pids.max
#   bash scripts/gpu-host-checks.sh bench [OUTDIR]    # benchmarks/threads.py --quotas 1,4
#   bash scripts/gpu-host-checks.sh nogpu [OUTDIR]    # jax with the host's GPUs hidden
#   bash scripts/gpu-host-checks.sh atest [OUTDIR]    # calibrated, then limits.pids = estimate
#   bash scripts/gpu-host-checks.sh sweep [OUTDIR]    # stress-jax + GPU at CPUS="4 6 ... 16"
#
# Wheels in .whl/ (docker, click: see the device README) are installed into /tmp/site first.
# Each step is logged to OUTDIR/log.txt, a line per check goes to OUTDIR/checks.txt, and
# OUTDIR/results.tgz holds the run folders and the JSON (three files: the device returns few). A step that overruns its own limit is stopped and
# the next one runs; the whole script keeps inside BUDGET_S seconds (default 540).
set -u
mode=${1:-main}
out=${2:-${OUT:-/tmp/gpu-host-checks}}
budget=${BUDGET_S:-540}
R=$(mktemp -d)
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
t0=$SECONDS

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
L() { python3 -m launcher "$@"; }
LA=(python3 -m launcher)  # for `step`, whose timeout runs a program, not a function
Q=(); [ -n "${QUICK:-}" ] && Q=(--quick)  # QUICK=1: small sizes, to try this script on a laptop
RUN=("${LA[@]}" run --runtime native --interval 0.05)

pack() {
  cp "$R/checks.txt" "$out/" 2>/dev/null
  tar czf "$out/results.tgz" -C "$PWD" runs -C "$R" . 2>/dev/null || true
}
step() {  # step NAME SECONDS CMD...: run CMD under a limit, unless the budget is spent
  local name=$1 limit=$2; shift 2
  local left=$((budget - (SECONDS - t0)))
  if (( left < 20 )); then echo "== $name: skipped (budget spent)"; echo "$name skipped" >>"$R/checks.txt"; return; fi
  (( limit > left )) && limit=$left
  echo "== $name ($(( SECONDS - t0 ))s in, limit ${limit}s): $*"
  local s=$SECONDS
  timeout -k 5 "$limit" "$@"
  local rc=$?
  echo "== $name: exit $rc after $(( SECONDS - s ))s"
  echo "$name exit=$rc seconds=$(( SECONDS - s ))" >>"$R/checks.txt"
  pack
  return $rc
}

summary() {  # summary RUN_ID: one line with peak, kernel pids.peak, estimate, ratio, limits
  python3 - "$1" <<'EOF' | tee -a "$R/checks.txt"
import json, sys
from pathlib import Path
run = Path("runs") / sys.argv[1]
try:
    s = json.loads((run / "summary.json").read_text())
except OSError as exc:
    print(f"{sys.argv[1]}: no summary ({exc.strerror})"); sys.exit()
t, p = s["peaks"]["threads"], s["peaks"]["pids_current"]
est = s["threads_estimate"]["total"]
peak = max(x for x in (t["peak"], p.get("kernel_peak"), 0) if x is not None)
gpus = "; ".join(f"GPU {g['gpu']} util {g['util_peak_percent']}% mem {g['memory_percent']}%"
                 for g in s.get("gpus") or [])
print(f"{sys.argv[1]}: exit {s['exit_status']}, sampled peak {t['peak']}, kernel pids.peak "
      f"{p.get('kernel_peak')}, estimate {est} ({s['threads_estimate']['source']}), "
      f"peak/estimate {peak / est:.2f}; enforced {s['engine'].get('enforced')}; advisory "
      f"{s['engine'].get('advisory')}; {gpus}; {s['diagnosis']}")
EOF
}

estimate() {  # estimate WORKLOAD [ARGS]: the threads the run checks (the workload's own too)
  local n
  n=$(L run --runtime native --dry-run --json "$@" | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["threads_estimate"]["total"])')
  [ -n "$n" ] || { echo "estimate: no estimate for $*" >&2; n=1; }  # pids 1: refused, not unlimited
  echo "$n"
}

facts() {
  date -u +%FT%TZ; uname -r; nproc; python3 --version
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  python3 -c 'import jax, jaxlib, torch; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "torch", torch.__version__)'
  cat /proc/self/cgroup
  own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
  for d in /sys/fs/cgroup "$(dirname "$own")" "$own"; do
    echo "$d: controllers [$(cat "$d/cgroup.controllers")] subtree [$(cat "$d/cgroup.subtree_control" 2>/dev/null)] procs $(wc -l <"$d/cgroup.procs")"
  done
}

main_checks() {
  facts | tee "$R/facts.txt"
  step doctor 60 "${LA[@]}" doctor
  L doctor --json >"$R/doctor.json" 2>&1
  for fw in jax torch; do L plan -f $fw --json >"$R/plan-$fw-before.json" 2>&1; done

  # the reference workloads as a user runs them, on the built-in model
  step before-jax 150 "${RUN[@]}" --name before-jax stress-jax --phase 1 --max-runs 3 "${Q[@]}"; summary before-jax
  step before-torch 150 "${RUN[@]}" --name before-torch pytorch-phase3 --max-points 3 "${Q[@]}"; summary before-torch

  # limits.pids = the estimate, enforced (--require-limits refuses otherwise)
  for pair in "jax stress-jax --phase 1 --max-runs 3" "torch pytorch-phase3 --max-points 3"; do
    set -- $pair; fw=$1; shift
    n=$(estimate "$@"); printf 'extends: auto\nlimits: {pids: %s}\n' "$n" >"$R/pids-est-$fw.yaml"
    echo "pids-est-$fw: limits.pids $n" >>"$R/checks.txt"
    step "pids-est-$fw" 150 "${RUN[@]}" --require-limits --profile "$R/pids-est-$fw.yaml" \
      --name "pids-est-$fw" "$@" "${Q[@]}"; summary "pids-est-$fw"
  done

  # calibrate (CPU and GPU side), then the same runs on what it measured
  step calibrate 240 "${LA[@]}" calibrate ${CAL_CPUS:+--cpus "$CAL_CPUS"}
  cp ~/.cache/launcher/calibration.json "$R/" 2>/dev/null
  for fw in jax torch; do L plan -f $fw --json >"$R/plan-$fw-after.json" 2>&1; done
  step after-jax 150 "${RUN[@]}" --name after-jax stress-jax --phase 1 --max-runs 3 "${Q[@]}"; summary after-jax
  step after-torch 150 "${RUN[@]}" --name after-torch pytorch-phase3 --max-points 3 "${Q[@]}"; summary after-torch
  n=$(estimate stress-jax --phase 1); printf 'extends: auto\nlimits: {pids: %s}\n' "$n" >"$R/pids-cal-jax.yaml"
  echo "pids-cal-jax: limits.pids $n" >>"$R/checks.txt"
  step pids-cal-jax 150 "${RUN[@]}" --require-limits --profile "$R/pids-cal-jax.yaml" \
    --name pids-cal-jax stress-jax --phase 1 --max-runs 3 "${Q[@]}"; summary pids-cal-jax

  # limits.pids 40: refused before the start, or fitted with --fit
  printf 'extends: auto\nlimits: {pids: 40}\n' >"$R/pids-40.yaml"
  step pids-40-refused 60 "${RUN[@]}" --profile "$R/pids-40.yaml" --name pids-40 stress-jax --phase 1 --max-runs 1 "${Q[@]}"
  [ -d runs/pids-40 ] && echo "pids-40: a run folder was left" >>"$R/checks.txt"
  step pids-40-fit 150 "${RUN[@]}" --fit --profile "$R/pids-40.yaml" --name pids-40-fit stress-jax --phase 1 --max-runs 3 "${Q[@]}"; summary pids-40-fit

  # an outer pids.max of 115 around launcher (a cgroup made by hand, as report 002's)
  api=/sys/fs/cgroup/process_api
  if [ -w "$api/cgroup.subtree_control" ]; then
    echo "+pids +cpu" >"$api/cgroup.subtree_control"
    for v in plain fit; do
      o=$api/launcher-outer115-$v-$$; mkdir "$o" && echo 115 >"$o/pids.max" || continue
      flag=(); [ $v = fit ] && flag=(--fit)
      step "outer115-$v" 150 sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$o" \
        "${RUN[@]}" "${flag[@]}" --name "outer115-$v" \
        stress-jax --phase 1 --max-runs 3 "${Q[@]}"
      echo "outer115-$v: pids.events $(cat "$o/pids.events") pids.peak $(cat "$o/pids.peak" 2>/dev/null)" >>"$R/checks.txt"
      summary "outer115-$v"
      rmdir "$o"/* "$o" 2>/dev/null
    done
  else
    echo "outer115: $api not writable here, skipped" >>"$R/checks.txt"
  fi

  for d in runs/*/; do [ -f "$d/summary.json" ] && L report "$d" >"$R/report-$(basename "$d").txt" 2>&1; done
  for d in runs/before-jax runs/before-torch; do [ -d "$d" ] && L report "$d" --plot >/dev/null 2>&1; done
  pack
}

bench() {
  facts | tee "$R/facts.txt"
  step threads-bench 520 python3 benchmarks/threads.py --quotas 1,4 --frameworks none,torch,jax \
    --rounds 5 --seconds 1 | tee "$R/threads-bench.txt"
}

nogpu() {  # a CUDA build of jax on a GPU host, run with --gpus none: its `cuda` thread counted
  facts | tee "$R/facts.txt"
  step calibrate-jax 120 "${LA[@]}" calibrate -f jax --cpus 4,16
  cp ~/.cache/launcher/calibration.json "$R/" 2>/dev/null
  n=$(estimate --gpus none stress-jax --phase 1); printf 'extends: auto\nlimits: {pids: %s}\n' "$n" >"$R/pids-nogpu.yaml"
  echo "pids-nogpu: limits.pids $n" >>"$R/checks.txt"
  step pids-nogpu 150 "${RUN[@]}" --require-limits --gpus none --profile "$R/pids-nogpu.yaml" \
    --name pids-nogpu stress-jax --phase 1 --max-runs 2 "${Q[@]}"; summary pids-nogpu
  step threads-jax 150 python3 benchmarks/threads.py --quotas 1,4 --frameworks jax --rounds 1 \
    --seconds 0.5 | tee "$R/threads-jax.txt"
}

atest() {  # after calibrating, stress-jax with and without its GPU under limits.pids = estimate
  facts | tee "$R/facts.txt"
  step calibrate-jax 120 "${LA[@]}" calibrate -f jax --cpus 16
  for g in none all; do
    n=$(estimate --gpus $g stress-jax --phase 1); printf 'extends: auto\nlimits: {pids: %s}\n' "$n" >"$R/pids-$g.yaml"
    echo "atest-$g: limits.pids $n" >>"$R/checks.txt"
    step "atest-$g" 150 "${RUN[@]}" --require-limits --gpus $g --profile "$R/pids-$g.yaml" \
      --name "atest-$g" stress-jax --phase 1 --max-runs 3 "${Q[@]}"; summary "atest-$g"
  done
}

sweep() {  # the built-in model against the run cgroup's pids.peak, one cpuset per run
  facts | tee "$R/facts.txt"
  local i=0 c
  for c in ${CPUS:-4 6 8 10 11 12 13 14 16}; do
    i=$((i + 1))
    printf 'extends: auto\nlimits: {cpuset: "0-%s"}\n' $((c - 1)) >"$R/cpus-$c.yaml"
    step "sweep-$c-$i" 60 "${RUN[@]}" --profile "$R/cpus-$c.yaml" --name "sweep-$c-$i" \
      stress-jax --phase 1 --max-runs 3 "${Q[@]}"; summary "sweep-$c-$i"
  done
}

case $mode in
  atest) atest ;;
  sweep) sweep ;;
  main) main_checks ;;
  bench) bench ;;
  nogpu) nogpu ;;
  *) echo "usage: $0 main|bench|nogpu|atest|sweep [OUTDIR]"; exit 2 ;;
esac
echo "== done in $(( SECONDS - t0 ))s"
cat "$R/checks.txt"
pack
