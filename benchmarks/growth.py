"""Growth foreseen: a leak matrix, real leaks from public reports, and false alarms, real
processes under real limits.

    python benchmarks/growth.py [--flat 20] [--seconds 0.25] [--corpus] [--json FILE]

Each leak row runs examples/growth/leak.py through `launcher run --runtime native` under a
limit it dies of near cycle 20 (threads: cgroup pids; memory: the cgroup memory limit), with
+-50% noise in each cycle's length and growth. A row gives the cycle its first projection was
said in, the cycle it named, the cycle the run really died in, and the lead time (from that
line to the death, as a share of the run). Targets: the named cycle within +-2 of the death,
the lead at least half the run. Then --flat runs that do not grow (half a sawtooth of 100 MB
allocated and freed each cycle, half 8 threads started and joined each cycle) under the same
kind of limits: each line said in one of them is a false alarm (target: none).

The silent rows run the same leaks printing nothing (time windows mark the growth) or only
their own counter (`Process 0, iteration N: M open FDs`): the lead as a share of the run
(target: at least a third) and the second the limit was named for beside the second of the
death. --corpus runs examples/growth/corpus/ (leaks reproduced from public bug reports, each
under the limit that kills it, and controls that do not leak): when the growth was said, when
it died, the share of the run ahead, and what the death was named as (target: 80% of the
leaks said at least a third of the run ahead, every death named with its limit, no line on a
control). `--only WORD...` runs the corpus scripts whose names hold one of the words; a row's
`named_right` says whether its death holds every word of its entry's `named` (the resource,
what grew and the fix: issue 46's entries).
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
# the same leaks, printing nothing or a counter of their own (the issue 39 rows)
# (each dies in about a minute at --seconds 0.25: time windows need more than a few seconds)
SILENT = (("threads", 1, "pids: 240", ""), ("mib", 0.5, "memory: 140MiB", ""),
          ("files", 1, "nofile: 256", "Process 0, iteration {n}: {files} open FDs"),
          ("threads", 1, "pids: 240", "{n}"))
CORPUS = ROOT / "examples/growth/corpus"


def run(tmp: Path, name: str, limits: str, args: list[str], script: Path = LEAK) -> dict:
    prof = tmp / f"{name}.yaml"
    prof.write_text(f"name: {name}\nextends: base\nlimits:\n  {limits}\n".replace(
        "; ", "\n  "))
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "launcher", "run", "--runtime", "native", "--profile",
                    str(prof), "--name", name, "--", sys.executable, str(script), *args],
                   cwd=script.parent, capture_output=True, timeout=900,
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


def ahead(s: dict) -> dict:
    """When the growth was first said, when the run ended, the share of the run ahead, what
    the death was named as."""
    g, end = s["growth"], s["duration_s"]
    said = g["said"][0] if g["said"] else None
    return {"unit": g.get("unit"), "said_s": said and round(said["t"], 1),
            "said_cycle": said and (said["cycle"] if g.get("unit") != "window" else None),
            "named_s": said and said["trend"].get("reached_s"), "run_s": round(end, 1),
            "lead_share": said and round((end - said["t"]) / end, 2),
            "line": said and said["line"], "exit": s["exit_status"],
            "diagnosis": s["diagnosis"]}


def silent_row(tmp: Path, what: str, rate: float, limits: str, say: str, seconds: float,
               seed: int) -> dict:
    s = run(tmp, f"silent-{what}-{rate}", limits,
            [f"--{what}", str(rate), "--cycles", "400", "--seconds", str(seconds), "--noise",
             "0.5", "--seed", str(seed), "--say", say])
    return {"leak": f"{rate:g} {what}/cycle", "prints": say or "nothing", "limit": limits,
            **ahead(s)}


def corpus_rows(tmp: Path, only: list[str] | None = None) -> list[dict]:
    """Each leak of examples/growth/corpus/ under the limit that kills it, each control under
    the same kind of limit."""
    out = []
    for entry in json.loads((CORPUS / "corpus.json").read_text()):
        if only and not any(o in entry["script"] for o in only):
            continue
        limit = "; ".join(f"{k}: {v}" for k, v in entry["limit"].items())
        name = Path(entry["script"]).stem
        s = run(tmp, name, limit, [str(a) for a in entry.get("args", [])],
                script=CORPUS / entry["script"])
        named = entry.get("named")  # the words a right death names (resource and fix)
        out.append({"script": entry["script"], "source": entry["source"],
                    "grows": entry["grows"], "limit": limit, "control": entry["control"],
                    "said": len(s["growth"]["said"]), **ahead(s),
                    "named_right": None if not named else all(
                        w in s["diagnosis"] for w in named)})
    return out


def flat_run(tmp: Path, i: int, seconds: float) -> dict:
    args = ["--sawtooth-mib", "100"] if i % 2 == 0 else ["--churn-threads", "8"]
    if i % 4 >= 2:  # half of them print nothing: time windows stand in
        args += ["--say", ""]
    s = run(tmp, f"flat-{i}", "pids: 64; memory: 400MiB",
            [*args, "--cycles", "30" if i % 4 < 2 else "120", "--seconds", str(seconds * 0.6),
             "--noise", "0.5", "--seed", str(i)])
    return {"run": f"flat-{i} ({' '.join(args)})", "said": len(s["growth"]["said"]),
            "exit": s["exit_status"], "cycles": len(s["growth"]["cycles"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flat", type=int, default=20, help="runs that do not grow")
    ap.add_argument("--seconds", type=float, default=0.25, help="a leak cycle's mean length")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", action="store_true", help="run examples/growth/corpus/ too")
    ap.add_argument("--only", nargs="*", default=None,
                    help="with --corpus: only the scripts whose names hold one of these")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rows = [leak_row(tmp, what, rate, limits, a.seconds, a.seed)
                for what, rate, limits in MATRIX]
        flats = [flat_run(tmp, i, a.seconds) for i in range(a.flat)]
        silent = [silent_row(tmp, *row, a.seconds, a.seed) for row in SILENT]
        corpus = corpus_rows(tmp, a.only) if a.corpus else []
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
    print("\nleak (prints)                          limit           unit       said at  named   "
          "ended   lead")
    for r in silent:
        print(f"{r['leak'] + ' (' + r['prints'][:20] + ')':<38} {r['limit']:<15} "
              f"{str(r['unit']):<10} {_s(r['said_s'])} {_s(r['named_s'])} {_s(r['run_s'])} "
              f"{r['lead_share'] or '-'}")
    print(f"silent and counter rows said at least a third of the run ahead: "
          f"{sum((r['lead_share'] or 0) >= 1 / 3 for r in silent)}/{len(silent)}")
    if corpus:
        print("\ncorpus (examples/growth/corpus)       grows    limit          said at  ended   "
              "lead  named as")
        for r in corpus:
            kind = "control" if r["control"] else r["grows"]
            print(f"{r['script']:<38} {kind:<8} {r['limit']:<14} {_s(r['said_s'])} "
                  f"{_s(r['run_s'])} {r['lead_share'] or '-':<5} {r['diagnosis'][:150]}")
        leaks = [r for r in corpus if not r["control"]]
        controls = [r for r in corpus if r["control"]]
        judged = [r for r in leaks if r["named_right"] is not None]
        print(f"leaks said at least a third of the run ahead: "
              f"{sum((r['lead_share'] or 0) >= 1 / 3 for r in leaks)}/{len(leaks)}; deaths "
              f"named with the right resource and fix: "
              f"{sum(bool(r['named_right']) for r in judged)}/{len(judged)}; lines on "
              f"controls: {sum(r['said'] for r in controls)} in {len(controls)}")
    if a.json:
        a.json.write_text(json.dumps({"leaks": rows, "flat": flats, "silent": silent,
                                      "corpus": corpus}, indent=2) + "\n")
    return 0


def _s(value: float | None) -> str:
    return f"{value:>6.1f}s" if value is not None else "      -"


if __name__ == "__main__":
    sys.exit(main())
