"""Kinds of growth beyond threads and bytes (issue 46), each with a real process under a real
limit: processes (children never waited for), a limit met and survived (exit 0), a counter
that stops counting, and slow counts in time windows; the open files' census."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from launcher.telemetry import map_census
from launcher.telemetry.fd_census import open_files, words
from launcher.telemetry.growth import first_death
from launcher.telemetry.timeline import Timeline, fit_time


def run_script(tmp_path: Path, limits: str, code: str,
               timeout: float = 150) -> tuple[int, str, dict[str, Any]]:
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent(code))
    prof = tmp_path / "p.yaml"
    prof.write_text(f"name: p\nextends: base\nlimits:\n  {limits}\n")
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", "run", "--runtime", "native", "--profile",
         str(prof), "--name", "r", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
        env={**os.environ, "LAUNCHER_RUNS_DIR": str(runs)})
    summary = json.loads((runs / "r/summary.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, summary


def test_zombies_are_named_as_processes_with_the_fix_to_reap_them(tmp_path):
    rc, out, summary = run_script(tmp_path, "pids: 40", """
        import subprocess, time
        kept = []
        for n in range(1, 200):
            print(f"job {n}", flush=True)
            kept.append(subprocess.Popen(["true"]))  # never waited for: a zombie each
            time.sleep(0.25)
        """)
    assert rc != 0, out
    d = summary["diagnosis"]
    assert re.match(r"processes grew \+(1|0\.9\d*|1\.\d+) per job: ", d), d
    assert "zombies of true, children of python" in d, d
    assert "pids.max 40 was reached" in d and "wait for each child" in d, d
    assert "join or close the threads" not in d, d


def test_a_limit_met_and_survived_is_named_with_the_growth_that_led_there(tmp_path):
    rc, out, summary = run_script(tmp_path, "pids: 40", """
        import os, threading, time
        hang = threading.Event()
        for n in range(1, 200):
            print(f"attempt {n}", flush=True)
            try:
                for _ in range(3):
                    threading.Thread(target=hang.wait, daemon=True).start()
            except RuntimeError as exc:  # caught, retried, then given up: status 0
                print("error:", exc, flush=True)
                time.sleep(1)
                os._exit(0)
            time.sleep(0.25)
        """)
    assert rc == 0, out
    d = summary["diagnosis"]
    assert re.match(r"the workload exited with status 0, but threads grew \+(3|2\.\d+|3\.\d+) "
                    r"per attempt", d), d
    assert "pids.max 40 was reached" in d and "a higher limit only delays it" in d, d


def test_a_counter_that_stops_counting_gives_way_to_time_windows(tmp_path):
    # it counts for a while, then its numbers jump (other processes' pids slip in): the
    # rest of the run is no one cycle, time windows take over and the growth is said
    rc, out, summary = run_script(tmp_path, "pids: 64", """
        import random, threading, time
        hang = threading.Event()
        n = 100
        for i in range(400):
            n += 1 if i < 6 else random.randint(2, 40)
            print(f"forked child {n}", flush=True)
            threading.Thread(target=hang.wait, daemon=True).start()
            time.sleep(0.5)
        """)
    g = summary["growth"]
    assert rc != 0 and g["said"], out
    assert g["dropped"] and g["unit"] == "window", g["unit"]
    assert "a second" in g["said"][0]["line"] or "a minute" in g["said"][0]["line"]
    assert g["said"][0]["t"] < summary["duration_s"] * 0.75, (g["said"], summary["duration_s"])


def _first_said(values: list[int], limit: int) -> float | None:
    line = Timeline(1.0)
    for i, v in enumerate(values):
        row = {"t": float(i), "files": v, "nofile": limit}
        if line.add(row) and first_death(fit_time(line.cycles(), now=float(i))):
            return float(i)
    return None


def test_a_slow_count_is_said_a_third_ahead_and_flat_counts_never():
    # a file every 2 s, dying at 86 s: 1 s windows see steps of 0 and 1
    said = _first_said([5 + i // 2 for i in range(90)], 48)
    assert said is not None and said < 86 * 2 / 3, said
    rng = random.Random(1)
    assert _first_said([10 + rng.randint(0, 6) for _ in range(90)], 64) is None  # noise
    assert _first_said([10 + i % 12 for i in range(90)], 64) is None  # a sawtooth
    assert _first_said([5 + min(i * 2 // 5, 25) for i in range(90)], 64) is None  # bounded


def _holder(tmp_path: Path, code: str) -> subprocess.Popen[str]:
    """A child that runs `code`, says "ready" and waits: its descriptors are only its own
    (the test process's, a pytest worker's, hold whatever other tests left)."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code) + "\nprint('ready', flush=True)\n"
         "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, close_fds=True,
        cwd=tmp_path)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def _release(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=10)


def test_the_open_files_census_names_what_is_held(tmp_path):
    child = _holder(tmp_path, """
        held = [open("run.log", "a") for _ in range(6)]
    """)
    try:
        found = open_files(child.pid)
        text, kind = words(found, "python3 (pid 1)") or ("", "")
        assert (text, kind) == ("run.log open 6 times in python3 (pid 1)", "file"), found
    finally:
        _release(child)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    port = server.getsockname()[1]
    child = _holder(tmp_path, f"""
        import socket
        socks = [socket.create_connection(("127.0.0.1", {port})) for _ in range(5)]
    """)
    try:
        found = open_files(child.pid)
        text, kind = words(found, "x") or ("", "")
        assert kind == "socket" and f"sockets to 127.0.0.1:{port}" in text, found
    finally:
        _release(child)
        server.close()


def test_a_stop_leaves_room_for_a_whole_step_when_late_samples_fit_less():
    # a busy host's late boundary samples fit +2.91 a cycle where each cycle starts 3 threads:
    # the projection says the limit falls a cycle later than it does, and a stop then meets
    # a workload already past it (status 143 for 0); the reading at the boundary decides
    from launcher.telemetry.growth import Trend
    from launcher.telemetry.growth_watch import _no_room

    t = Trend("threads", "cycle", 2.91, None, 2, 11, 10, True, True, 40, 14, 0.5, None, None)
    assert _no_room(t, {"threads": 37}, 1)  # 37 + 3 (this cycle) + 3 (the spare) > 40
    assert not _no_room(t, {"threads": 34}, 1)  # 34 + 6 = 40: reaching it is allowed


def test_the_maps_census_names_the_file_mapped_again_and_again(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0" * 65536)
    child = _holder(tmp_path, """
        import mmap
        f = open("weights.bin", "rb")
        kept = [mmap.mmap(f.fileno(), 4096, access=mmap.ACCESS_READ) for _ in range(300)]
    """)
    try:
        found = map_census.mapped(child.pid)
        assert map_census.words(found, "python3 (pid 1)") == (
            "weights.bin mapped 300 times in python3 (pid 1)", "mapped_file"), found
    finally:
        _release(child)
    child = _holder(tmp_path, """
        import mmap
        kept = [mmap.mmap(-1, 4096 * (1 + n % 2)) for n in range(300)]
    """)
    try:
        text, kind = map_census.words(map_census.mapped(child.pid), "x") or ("", "")
        assert kind == "anonymous" and re.fullmatch(r"3\d\d anonymous maps in x", text), text
    finally:
        _release(child)
    child = _holder(tmp_path, "import json")  # a program's usual maps: nothing named
    try:
        assert map_census.words(map_census.mapped(child.pid), "x") is None
    finally:
        _release(child)


def test_a_maps_leak_is_named_by_its_file_in_the_growth_line(tmp_path):
    (tmp_path / "shard.bin").write_bytes(b"\0" * 65536)
    rc, out, summary = run_script(tmp_path, "pids: 400", """
        import mmap, time
        f = open("shard.bin", "rb")
        kept = []
        for n in range(1, 41):
            print(f"step {n}", flush=True)
            kept += [mmap.mmap(f.fileno(), 4096, access=mmap.ACCESS_READ) for _ in range(40)]
            time.sleep(0.2)
        """)
    assert rc == 0, out
    maps = [t for t in summary["growth"]["trends"] if t["series"] == "maps"]
    assert maps and maps[0]["grows"], summary["growth"]["trends"]
    assert re.fullmatch(r"shard\.bin mapped \d+ times in python3? \(pid \d+\)",
                        maps[0]["what"]), maps[0]


def test_a_maps_death_names_the_mapped_file_and_the_fix_for_mappings():
    from launcher.telemetry.growth_verdict import growth_record
    from tests.growth_runs import rows_of

    rows = rows_of([400 + 500 * i for i in range(10)], key="maps", limit=5000, excess=10)
    for i, row in enumerate(rows):
        row["who"] = {"maps_what": f"shard.bin mapped {400 * i} times in python3 (pid 7)",
                      "maps_kind": "mapped_file"}
    record = growth_record(rows, {"failure_text": {}}, {"reason": "maps", "diagnosis": "d."},
                           status=134)
    d = record["diagnosis"]
    assert re.match(r"memory maps grew \+500 per fold: shard\.bin mapped \d+ times in "
                    r"python3 \(pid 7\); vm\.max_map_count 5,000 was reached", d), d
    assert "del the np.memmap and its views" in d, d
