"""bench-memory (issue 23): a fit the measurements refuse is said so and never written as a
per-item cost, Ctrl-C ends it as `interrupted` (130) with nothing left behind, and its --help
says what it writes. Real workers in real cgroups."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.jobs.memory import MAX_FIT_ERROR, robust_fit
from tests.conftest import ROOT
from tests.docker_helpers import MEM_WORKER, PY, in_process, launcher, make_job, profile
from tests.polling import wait_until, while_running

MiB = 1 << 20
# The more items, the less memory: 80 MiB less 20 KiB per item.
FALLING = """\
import os, time
n = int(os.environ["LAUNCHER_CHUNK_END"]) - int(os.environ["LAUNCHER_CHUNK_START"])
data = bytearray((80 << 20) - n * (20 << 10))
for i in range(0, len(data), 4096):
    data[i] = 1
time.sleep(0.2)
"""


def _cpu(tmp: Path) -> str:
    return profile(tmp, "cpu", "extends: base\njobs: {max_concurrent: 2}\n")


def test_a_peak_that_falls_with_the_size_refuses_the_per_item_cost(tmp_path):
    spec = make_job(tmp_path, f"name: down\ncommand: [{PY}, worker.py]\nitems: 3000\n"
                              f"chunk_size: auto\noutput: out\n", FALLING)
    prof = tmp_path / "measured.yaml"
    proc = launcher("bench-memory", str(spec), "-p", _cpu(tmp_path), "--sizes", "500,1000,2000",
                    "--predict", "2500", "--write-profile", str(prof))
    assert proc.returncode == 0, proc.stderr
    [fit] = [line for line in proc.stdout.splitlines() if line.startswith("fit: ")]
    assert fit.startswith("fit: no per-item cost, refused: the peak does not grow with the size")
    assert "no prediction at 2500 items: more than the largest size measured (2000)" \
        in proc.stdout
    plan = shlex.split(proc.stdout.split("`launcher jobs plan ")[1].split("`")[0])
    assert in_process("jobs", "plan", *plan).returncode == 0  # the hint, pasted
    text = prof.read_text()
    assert "# No per-item cost: the peak does not grow with the size" in text
    assert "per item" not in text  # no negative slope, nor any other, goes into the profile
    data = json.loads(launcher("bench-memory", str(spec), "-p", _cpu(tmp_path), "--sizes",
                               "500,1000,2000", "--json").stdout)
    assert data["refused"] and data["per_item_bytes"] == 0
    largest = max(m["peak"] for m in data["measurements"])
    assert data["base_bytes"] == largest  # the largest peak measured, not a line through them
    assert data["chunk_size"] <= 2000  # no chunk beyond the sizes measured


def test_a_chunk_size_beyond_a_refused_fit_is_not_written_and_the_hint_measures_it(tmp_path):
    spec = make_job(tmp_path, f"name: down\ncommand: [{PY}, worker.py]\nitems: 3000\n"
                              f"chunk_size: 1500\noutput: out\n", FALLING)
    prof = tmp_path / "measured.yaml"
    proc = launcher("bench-memory", str(spec), "-p", _cpu(tmp_path), "--sizes", "500,1000",
                    "--write-profile", str(prof))
    assert proc.returncode == 1 and not prof.exists()
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("error: --write-profile: not written: the spec's chunk_size 1500 is "
                           "more than the largest size measured (1000)")
    hint = shlex.split(last.split("`")[1])  # the command it gives, pasted
    assert hint[:2] == ["launcher", "bench-memory"] and "500,1000,1500" in hint
    again = launcher(*hint[1:])
    assert again.returncode == 0, again.stderr
    assert "workers:" in prof.read_text() and "chunk_size: 1500" in prof.read_text()


@pytest.mark.parametrize("points,refused", [
    ([(500, 100 * MiB), (1000, 150 * MiB), (2000, 250 * MiB)], False),  # a line
    ([(500, 150 * MiB), (1000, 150 * MiB), (2000, 149 * MiB)], True),  # flat, a hair down
    ([(500, 369 * MiB), (1000, 150 * MiB), (2000, 160 * MiB)], True),  # issue 23's page cache
    ([(500, 100 * MiB), (1000, 100 * MiB), (2000, 400 * MiB)], True),  # no line: 35% off
])
def test_the_fit_is_refused_when_it_falls_or_misses(points, refused):
    f = robust_fit(points)
    assert bool(f.refused) == refused
    if refused:
        assert (f.per_item, f.base) == (0, max(v for _, v in points))
        assert f.peak(max(s for s, _ in points) + 1) is None  # nothing beyond the sizes
    else:
        assert f.per_item == pytest.approx(100 * MiB / 1000) and f.error < MAX_FIT_ERROR


SLOW = """\
import os, time
open(os.path.join(os.environ["MARKS"], "started"), "a").write("x\\n")
time.sleep(120)
"""


def _run_cgroups(pid: int) -> list[Path]:
    from launcher.runtime.native import _run_cgroup_dirs

    return [d for d in _run_cgroup_dirs(Path("/")) if d.name.startswith(f"launcher-{pid}-")]


def _alive(tag: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()


def test_ctrl_c_ends_bench_memory_as_interrupted_and_leaves_nothing(tmp_path):
    tag = f"bench-ctrlc-{os.getpid()}"
    spec = make_job(tmp_path, f"name: slow\ncommand: [{PY}, worker.py, {tag}]\nitems: 3000\n"
                              f"output: out\nenv: {{MARKS: {tmp_path}/marks}}\n", SLOW)
    # its own session, as a terminal's foreground job: Ctrl-C is SIGINT to its group
    proc = subprocess.Popen([sys.executable, "-m", "launcher", "bench-memory", str(spec), "-p",
                             "base", "--sizes", "500,1000"], start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(while_running(proc, (tmp_path / "marks/started").exists), 60,
               what="the first size to start")
    cgroups = _run_cgroups(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err
    assert "failed" not in err  # not `the worker failed ... killed by SIGINT`
    assert _alive(tag) == [], "a worker outlived bench-memory"
    assert cgroups and all(not d.exists() for d in cgroups)  # its chunk's cgroup had one
    assert _run_cgroups(proc.pid) == []


def test_bench_memory_help_says_what_it_writes(tmp_path):
    """--help names what the written profile holds, and nothing it does not hold."""
    spec = make_job(tmp_path, f"name: down\ncommand: [{PY}, worker.py]\nitems: 3000\n"
                              f"chunk_size: 1000\noutput: out\n", FALLING)
    prof = tmp_path / "measured.yaml"
    written = launcher("bench-memory", str(spec), "-p", _cpu(tmp_path), "--sizes", "500,1000",
                       "--write-profile", str(prof))
    assert written.returncode == 0, written.stderr
    keys = prof.read_text().split("\nname: ")[1]
    helptext = " ".join(launcher("bench-memory", "--help").stdout.split())
    assert "workers.memory" in helptext and "jobs.chunk_size" in helptext
    assert ("max_concurrent:" in keys) == ("jobs.max_concurrent" in helptext.replace(
        "no jobs.max_concurrent", "").replace("not jobs.max_concurrent", ""))


# The first run ever costs 120 MiB more, as a first read of the framework's files does (the
# page cache is charged to the first cgroup that reads them); every later run costs 40 MiB
# and 50 KiB per item.
FIRST_DEARER = """\
import os, time
n = int(os.environ["LAUNCHER_CHUNK_END"]) - int(os.environ["LAUNCHER_CHUNK_START"])
first = os.path.join(os.environ["MARKS"], "cached")
extra = 0 if os.path.exists(first) else 120 << 20
open(first, "w").close()
data = bytearray((40 << 20) + extra + n * (50 << 10))
for i in range(0, len(data), 4096):
    data[i] = 1
time.sleep(0.2)
"""


def test_the_first_run_is_a_warm_up_and_not_measured(tmp_path):
    spec = make_job(tmp_path, f"name: warm\ncommand: [{PY}, worker.py]\nitems: 3000\n"
                              f"output: out\nenv: {{MARKS: {tmp_path}/marks}}\n", FIRST_DEARER)
    proc = launcher("bench-memory", str(spec), "-p", _cpu(tmp_path), "--sizes", "500,1000,2000",
                    "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert not data["refused"] and data["fit_error"] < 0.05
    assert abs(data["per_item_bytes"] - (50 << 10)) / (50 << 10) < 0.15
    assert "after a warm-up run at 500 items that is not counted" in proc.stderr


def test_the_plan_of_a_job_with_no_measured_memory_gives_the_command_that_measures_it(tmp_path):
    spec = make_job(tmp_path, f"name: lin\ncommand: [{PY}, worker.py]\nitems: 3000\n"
                              f"chunk_size: 1000\noutput: out\n", MEM_WORKER)
    plan = in_process("jobs", "plan", str(spec), "-p", _cpu(tmp_path))
    assert plan.returncode == 0, plan.stderr
    hint = shlex.split(plan.stdout.split("this measures one: `")[1].split("`")[0])
    assert hint[:4] == ["launcher", "bench-memory", str(spec), "--sizes"] and \
        hint[4] == "500,1000,2000"
    proc = launcher(*hint[1:])  # pasted
    assert proc.returncode == 0, proc.stderr
    assert "workers:" in (tmp_path / "cpu-measured.yaml").read_text()
