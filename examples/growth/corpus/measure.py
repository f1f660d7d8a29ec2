"""Measure a corpus script: sample its process tree every 0.5 s while it runs.

    python measure.py [--nofile N] [--max-s S] [--stop-threads N] [--stop-rss-mib N]
                      [--out FILE.json] -- python script.py ARGS

Samples (of the whole tree, children included): threads (sum), RSS (sum, MiB), open files
(max over processes), memory maps (max over processes, /proc/PID/maps lines). Lines the
workload prints are timestamped, so growth can be given per second and per printed line.
`--nofile` runs it under RLIMIT_NOFILE N:N (as `prlimit --nofile=N:N`) and records when it died.
`--stop-*` ends it (SIGKILL to the tree) once a counter reaches the value: the time a cgroup
limit of that size would have been reached. `--pss` adds the tree's summed PSS and USS (forked
workers' RSS counts the parent's shared pages from the start; PSS does not).
This is the corpus's own measuring tool, not part of any reproduced report.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time

import psutil


def tree(p: psutil.Process) -> list[psutil.Process]:
    try:
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return [p]


def sample(p: psutil.Process, pss: bool = False) -> dict | None:
    thr = rss = pss_sum = uss_sum = 0
    fds = maps = 0
    procs = 0
    for q in tree(p):
        try:
            with q.oneshot():
                thr += q.num_threads()
                rss += q.memory_info().rss
                fds = max(fds, q.num_fds())
            if pss:
                full = q.memory_full_info()
                pss_sum += full.pss
                uss_sum += full.uss
            with open(f"/proc/{q.pid}/maps", "rb") as f:
                maps = max(maps, sum(1 for _ in f))
            procs += 1
        except (psutil.Error, OSError):
            continue
    if not procs:
        return None
    out = {"threads": thr, "rss_mib": round(rss / 2**20, 1), "fds": fds, "maps": maps,
           "procs": procs}
    if pss:
        out["pss_mib"] = round(pss_sum / 2**20, 1)
        out["uss_mib"] = round(uss_sum / 2**20, 1)
    return out


def slope(ts: list[float], ys: list[float]) -> float:
    n = len(ts)
    if n < 2:
        return 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    den = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den if den else 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nofile", type=int)
    ap.add_argument("--max-s", type=float, default=120)
    ap.add_argument("--stop-threads", type=int)
    ap.add_argument("--stop-rss-mib", type=float)
    ap.add_argument("--pss", action="store_true",
                    help="also sum PSS and USS over the tree (reads smaps: slower)")
    ap.add_argument("--stop-pss-mib", type=float)
    ap.add_argument("--out")
    ap.add_argument("--quiet", action="store_true", help="do not echo the workload's lines")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd

    def limit() -> None:
        os.setsid()
        if a.nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (a.nofile, a.nofile))

    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=limit, text=True, errors="replace")
    lines: list[tuple[float, str]] = []

    def reader() -> None:
        assert proc.stdout
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))
            if not a.quiet:
                print(f"[{lines[-1][0]:7.1f}] {line.rstrip()}", flush=True)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    p = psutil.Process(proc.pid)
    samples: list[dict] = []
    stopped = None
    while proc.poll() is None:
        s = sample(p, a.pss or bool(a.stop_pss_mib))
        now = time.monotonic() - t0
        if s:
            s["t"] = round(now, 2)
            samples.append(s)
            if a.stop_threads and s["threads"] >= a.stop_threads:
                stopped = f"threads reached {a.stop_threads}"
            if a.stop_rss_mib and s["rss_mib"] >= a.stop_rss_mib:
                stopped = f"rss reached {a.stop_rss_mib} MiB"
            if a.stop_pss_mib and s.get("pss_mib", 0) >= a.stop_pss_mib:
                stopped = f"pss reached {a.stop_pss_mib} MiB"
        if now > a.max_s and not stopped:
            stopped = f"max {a.max_s} s"
        if stopped:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        time.sleep(0.5)
    rc = proc.wait()
    end = time.monotonic() - t0
    th.join(timeout=5)
    # fit on the second half of the run's first... use samples after the first 25% of time
    out: dict = {"cmd": cmd, "rc": rc, "end_s": round(end, 1), "stopped": stopped,
                 "nofile": a.nofile, "n_lines": len(lines)}
    if samples:
        warm = [s for s in samples if s["t"] >= samples[-1]["t"] * 0.25] or samples
        ts = [s["t"] for s in warm]
        for k in ("threads", "rss_mib", "fds", "maps", "pss_mib", "uss_mib"):
            if k not in samples[0]:
                continue
            out[f"{k}_per_s"] = round(slope(ts, [s[k] for s in warm]), 3)
            out[f"{k}_first_last"] = [samples[0][k], samples[-1][k]]
            out[f"{k}_max"] = max(s[k] for s in samples)
        span = warm[-1]["t"] - warm[0]["t"]
        nl = sum(1 for t, _ in lines if warm[0]["t"] <= t <= warm[-1]["t"])
        out["lines_per_s"] = round(nl / span, 3) if span > 0 else None
    out["last_lines"] = [ln for _, ln in lines[-6:]]
    out["stopped_at_s"] = samples[-1]["t"] if stopped and samples else None
    out["samples"] = samples
    summary = {k: v for k, v in out.items() if k != "samples"}
    print(json.dumps(summary, indent=1), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
