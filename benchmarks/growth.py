"""Growth foreseen: a leak matrix and false alarms, real processes under real limits.

    python benchmarks/growth.py [--flat 20] [--seconds 0.25] [--json FILE]

Each leak row runs examples/growth/leak.py through `launcher run --runtime native` under a
limit it dies of near cycle 20 (threads: cgroup pids; memory: the cgroup memory limit), with
+-50% noise in each cycle's length and growth. A row gives the cycle its first projection was
said in, the cycle it named, the cycle the run really died in, and the lead time (from that
line to the death, as a share of the run). Targets: the named cycle within +-2 of the death,
the lead at least half the run. Then --flat runs that do not grow (half a sawtooth of 100 MB
allocated and freed each cycle, half 8 threads started and joined each cycle) under the same
kind of limits: each line said in one of them is a false alarm (target: none).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEAK = ROOT / "examples/growth/leak.py"
# (what leaks, per cycle, the profile's limits): death near cycle 20 of a ~20 MiB, 3-task base
MATRIX = (("threads", 1, "pids: 24"), ("threads", 3, "pids: 64"), ("threads", 10, "pids: 204"),
          ("mib", 0.5, "memory: 30MiB"), ("mib", 5, "memory: 120MiB"),
          ("mib", 20, "memory: 420MiB"))


def run(tmp: Path, name: str, limits: str, args: list[str]) -> dict:
    prof = tmp / f"{name}.yaml"
    prof.write_text(f"name: {name}\nextends: base\nlimits:\n  {limits}\n".replace(
        "; ", "\n  "))
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "launcher", "run", "--runtime", "native", "--profile",
                    str(prof), "--name", name, "--", sys.executable, str(LEAK), *args],
                   cwd=tmp, capture_output=True, timeout=600,
                   env={**os.environ, "LAUNCHER_RUNS_DIR": str(tmp / "runs")})
    summary = json.loads((tmp / "runs" / name / "summary.json").read_text())
    summary["wall_s"] = time.monotonic() - t0
    return summary


def leak_row(tmp: Path, what: str, rate: float, limits: str, seconds: float, seed: int) -> dict:
    s = run(tmp, f"leak-{what}-{rate}", limits,
            [f"--{what}", str(rate), "--cycles", "200", "--seconds", str(seconds), "--noise",
             "0.5", "--seed", str(seed)])
    g = s["growth"]
    died = g["cycles"][-1]["n"] if g["cycles"] else None
    end = s["duration_s"]
    said = g["said"][0] if g["said"] else None
    return {"leak": f"{rate:g} {'threads' if what == 'threads' else 'MiB'}/cycle",
            "limit": limits, "said_in": said and said["cycle"],
            "named": said and said["trend"]["reached"], "died_in": died,
            "error": said and died and said["trend"]["reached"] - died,
            "lead_s": said and round(end - said["t"], 1), "run_s": round(end, 1),
            "lead_share": said and round((end - said["t"]) / end, 2),
            "exit": s["exit_status"], "diagnosis": s["diagnosis"]}


def flat_run(tmp: Path, i: int, seconds: float) -> dict:
    args = ["--sawtooth-mib", "100"] if i % 2 == 0 else ["--churn-threads", "8"]
    s = run(tmp, f"flat-{i}", "pids: 64; memory: 400MiB",
            [*args, "--cycles", "30", "--seconds", str(seconds * 0.6), "--noise", "0.5",
             "--seed", str(i)])
    return {"run": f"flat-{i} ({' '.join(args)})", "said": len(s["growth"]["said"]),
            "exit": s["exit_status"], "cycles": len(s["growth"]["cycles"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flat", type=int, default=20, help="runs that do not grow")
    ap.add_argument("--seconds", type=float, default=0.25, help="a leak cycle's mean length")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rows = [leak_row(tmp, what, rate, limits, a.seconds, a.seed)
                for what, rate, limits in MATRIX]
        flats = [flat_run(tmp, i, a.seconds) for i in range(a.flat)]
    print("leak            limit           first said  named  died  error  lead (share of run)")
    for r in rows:
        error = "-" if r["error"] is None else r["error"]
        print(f"{r['leak']:<15} {r['limit']:<15} cycle {r['said_in'] or '-':<5} "
              f"{r['named'] or '-':<6} {r['died_in'] or '-':<5} {error:<6} "
              f"{r['lead_s'] or '-'} s of {r['run_s']} s ({r['lead_share'] or '-'})")
    ok = sum(r["error"] is not None and abs(r["error"]) <= 2 for r in rows)
    ahead = sum((r["lead_share"] or 0) >= 0.5 for r in rows)
    alarms = sum(f["said"] > 0 for f in flats)
    print(f"within +-2 cycles: {ok}/{len(rows)}; said at least half the run ahead: "
          f"{ahead}/{len(rows)}; false alarms: {alarms} in {len(flats)} flat and sawtooth runs")
    if a.json:
        a.json.write_text(json.dumps({"leaks": rows, "flat": flats}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
