#!/usr/bin/env bash
# Issue 30's checks on a GPU host (pure cgroup v2, 16 cores, no network), natively, as root:
# launcher's own census of torch (NCCL process groups) and JAX on the GPU, a memory leak under a
# memory limit (the kernel's memory.peak reset per boundary where the kernel allows it), the
# stop before the limit, a what-if, and telemetry's cost at 16 cores with 1,000 threads.
#
#   bash scripts/gpu-growth-checks.sh [OUTDIR]
#
# Each step's output goes to OUTDIR/log.txt; OUTDIR/results.tgz holds the run folders.
set -u
out=${1:-${OUT:-/tmp/gpu-growth-checks}}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export LAUNCHER_RUNS_DIR=$PWD/runs
L=(python3 -m launcher)
P=$(mktemp -d)
step() { local limit=$1; shift; echo "== $* (limit ${limit}s)"; local s=$SECONDS
  timeout -k 5 "$limit" "$@"; echo "== exit $? after $(( SECONDS - s ))s"; }
date -u; uname -r; nproc; nvidia-smi -L
python3 -c 'import torch, jax; print("torch", torch.__version__, "jax", jax.__version__)'
cat /proc/self/cgroup; own=$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "own memory.max: $(cat /sys/fs/cgroup$own/memory.max 2>/dev/null)"
printf 'name: m400\nextends: base\nlimits:\n  memory: 400MiB\n' > "$P/m400.yaml"
printf 'name: p120\nextends: base\nlimits:\n  pids: 120\n' > "$P/p120.yaml"
step 90 "${L[@]}" run --runtime native --framework torch --name torch-groups -- \
  python3 examples/growth/gpu_cycles.py torch-groups --cycles 12 --seconds 0.5
step 30 "${L[@]}" report runs/torch-groups --profile "$P/p120.yaml"
step 90 "${L[@]}" run --runtime native --framework jax --name jax-shapes -- \
  python3 examples/growth/gpu_cycles.py jax-shapes --cycles 10 --seconds 0.5
step 30 "${L[@]}" report runs/jax-shapes
step 60 "${L[@]}" run --runtime native --profile "$P/m400.yaml" --name mem-leak -- \
  python3 examples/growth/leak.py --mib 20 --cycles 40 --seconds 0.3 --noise 0.5 --seed 3
step 30 "${L[@]}" report runs/mem-leak
step 60 "${L[@]}" run --runtime native --profile "$P/m400.yaml" --name mem-stop \
  --stop-before-limit -- python3 examples/growth/leak.py --mib 20 --cycles 40 --seconds 0.3
step 30 "${L[@]}" report runs/mem-stop
step 60 "${L[@]}" run --runtime native --name thread-leak -- \
  python3 examples/growth/leak.py --threads 10 --cycles 15 --seconds 0.3
step 30 "${L[@]}" report runs/thread-leak --profile "$P/p120.yaml"
python3 - <<'PY'
import json
for run in ("torch-groups", "jax-shapes", "mem-leak"):
    rows = [json.loads(x) for x in open(f"runs/{run}/telemetry.jsonl")]
    marks = [r for r in rows if r.get("cycle")]
    print(run, "kernel memory peaks:", [r.get("memory_peak_bytes") for r in marks][:6])
    print(run, "last census:", json.dumps(next((r["census"] for r in reversed(rows)
                                                if r.get("census")), None)))
PY
step 120 python3 benchmarks/telemetry.py --framework none --threads 1000 --samples 100
step 60 python3 benchmarks/telemetry.py --framework torch --samples 100
tar czf "$out/results.tgz" runs 2>/dev/null
echo "== done in ${SECONDS}s"
