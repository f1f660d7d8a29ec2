"""launcher/supervise/lazy.py, driven directly around a real workload process and the real
watch (watcher.Watcher, its sampler and its record): the watch started at the workload's
first output or a quarter second after its start, whichever comes first; the output read
before it kept (256 KiB at most) and read by it as it came; a watch that cannot start said
once and never tried again; and the record of each kind of end (a quick success: the record
without the fit; a quick failure: the watch started to read its words; a watched run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher import contract as c
from launcher.supervise.lazy import LazyWatcher
from launcher.telemetry.watch_settings import WatchSettings
from tests.conftest import ROOT
from tests.polling import wait_until

PY = sys.executable
CMD = [PY, "-c", "the workload"]
START_AFTER = 0.25  # seconds after the workload's start (as documented)
EARLY_MAX = 1 << 18  # bytes of output kept until the watch starts (as documented)


@pytest.fixture
def pid() -> Iterator[int]:
    """A workload: a process that waits for its stdin's end."""
    proc = subprocess.Popen([PY, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield proc.pid
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=60)


class Said(list):  # type: ignore[type-arg]
    """The supervisor's lines, as `say` gets them."""

    def __call__(self, line: str) -> None:
        self.append(line)


def lazy(tmp_path: Path, settings: WatchSettings | None = None, *,
         record: bool = True) -> tuple[LazyWatcher, Said]:
    """A lazy watch of CMD, its record in tmp_path/record (none: `record` False)."""
    said = Said()
    environ = {c.RECORD_DIR: str(tmp_path / "record")} if record else {}
    return LazyWatcher(settings or WatchSettings(interval=0.5), CMD, said, environ), said


def summary(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "record" / "summary.json").read_text())  # type: ignore[no-any-return]


ENDED = {"reason": "exit", "diagnosis": "the workload ended"}
EXTRA = {"pids_peak_kernel": 3, "memory_peak_kernel": None}


def test_importing_it_imports_nothing_of_the_watch():
    """The point of it: the watch's imports (psutil, the fit, the telemetry) are paid only
    once a watch starts."""
    code = ("import sys, launcher.supervise.lazy\n"
            "print(sorted(m for m in sys.modules if m.startswith('launcher.telemetry')"
            " or m == 'psutil' or m == 'launcher.supervise.watcher'))\n")
    proc = subprocess.run([PY, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_watch_starts_a_quarter_second_after_the_workloads_start(tmp_path, pid):
    lw, said = lazy(tmp_path)
    lw.started -= 10.0  # made long before the workload started: the start counts
    lw.wall -= 10.0
    mono, wall = time.monotonic(), time.time()
    lw.spawned(pid, ["/a/cgroup"])
    assert lw.started >= mono and lw.wall >= wall
    first = lw.tick()
    assert 0 < first <= START_AFTER and lw.watcher is None  # not yet: the seconds left
    wait_until(lambda: (lw.tick(), lw.watcher)[1] is not None, timeout=30,
               what="the watch to start")
    assert time.monotonic() - mono >= START_AFTER
    watcher = lw.watcher
    assert watcher.pid == pid and watcher.started == lw.wall  # the workload's start
    assert watcher.command == CMD and watcher.folder == tmp_path / "record"
    assert said == []
    assert 0 <= lw.tick() <= 0.5  # the watch's own ticks now: its sampling interval
    assert lw.watcher is watcher  # started once
    lw.exited()
    assert watcher.ended_at is not None  # the moment its growth stopped


def test_the_workloads_first_output_starts_the_watch_and_the_output_before_is_read_by_it(
        tmp_path, pid):
    lw, said = lazy(tmp_path)
    lw.exited()  # nothing started: nothing to tell
    lw.output("stdout", b"Epoch 1/3\n")  # before the workload is known: kept
    assert lw.watcher is None and len(lw.early) == 1 and lw.kept == 10
    lw.spawned(pid, [])
    lw.output("stderr", b"warn\n")  # its first output: the watch starts at once
    watcher = lw.watcher
    assert watcher is not None and watcher.pid == pid and said == []
    assert lw.early == []
    reading = watcher.reading
    assert set(reading.accounts) == {"stdout", "stderr"}
    assert reading.record()["read_bytes"] == 10 + 5  # what came before, then this
    assert "epoch" in watcher.watch.marks.example  # the kept line read as a cycle's
    lw.output("stdout", b"Epoch 2/3\n")
    assert lw.watcher is watcher and reading.accounts["stdout"].read_bytes == 20


def test_no_more_than_256_kib_is_kept_before_the_watch_starts(tmp_path, pid):
    lw, said = lazy(tmp_path)
    for _ in range(3):
        lw.output("stdout", b"x" * (100 << 10))
    lw.output("stdout", b"more\n")
    assert [len(data) for _, data, _ in lw.early] == [100 << 10, 100 << 10, 56 << 10]
    assert lw.kept == EARLY_MAX == 256 << 10
    assert all(stream == "stdout" and isinstance(came, float) for stream, _, came in lw.early)
    lw.spawned(pid, [])
    lw.output("stdout", b"y\n")
    assert lw.watcher.reading.record()["read_bytes"] + lw.watcher.reading.record()[
        "skipped_bytes"] == EARLY_MAX + 2
    assert said == []


def test_a_watch_that_cannot_start_is_said_once_and_the_workload_runs_on(tmp_path, pid):
    # a growth window that is no number: the watch's options cannot be read
    lw, said = lazy(tmp_path, WatchSettings(growth={"window": "soon"}))
    lw.output("stdout", b"before\n")
    lw.spawned(pid, [])
    lw.output("stdout", b"first\n")
    assert lw.watcher is None and lw.failed
    assert said == ["warning: growth is not watched in this run (ValueError: could not "
                    "convert string to float: 'soon')"]
    assert lw.early == []
    lw.output("stdout", b"later\n")  # neither kept nor tried again
    assert lw.early == [] and lw.kept == len(b"before\n")
    assert lw.tick() == 1.0 and lw.tick() == 1.0
    lw.exited()
    assert lw.finish(0, "done", ENDED, EXTRA) == (0, "done", None, None)
    assert lw.finish(1, "died", ENDED, EXTRA) == (1, "died", None, None)
    assert len(said) == 1


def test_a_success_over_before_the_watch_began_gets_its_record_without_the_fit(tmp_path,
                                                                               pid):
    lw, said = lazy(tmp_path)
    lw.spawned(pid, [])
    assert lw.finish(0, "ok, said", ENDED, EXTRA) == (0, "ok, said", None,
                                                      str(tmp_path / "record"))
    assert lw.watcher is None and said == []  # never started
    s = summary(tmp_path)
    assert (s["exit_status"], s["workload_status"], s["diagnosis"]) == (0, 0, "ok, said")
    assert s["started"] == lw.wall and s["samples"] == 0 and s["growth"] == {}
    assert s["command"] == CMD and s["pids_peak_kernel"] == 3
    assert (tmp_path / "record" / "telemetry.jsonl").read_text() == ""


def test_a_run_finished_before_any_workload_was_told_counts_from_the_watchs_making(tmp_path):
    made = time.time()
    lw, said = lazy(tmp_path)
    assert 0 < lw.tick() <= START_AFTER
    assert lw.finish(0, "nothing ran", ENDED, {})[3] == str(tmp_path / "record")
    assert made <= summary(tmp_path)["started"] <= time.time()
    assert said == []


def test_a_failure_before_the_watch_began_starts_it_to_read_its_words(tmp_path, pid):
    lw, said = lazy(tmp_path)
    lw.output("stderr", b"MemoryError\n")  # before the workload is known: kept
    lw.spawned(pid, ["/its/cgroup"])
    status, sentence, record, folder = lw.finish(1, "died", ENDED, EXTRA)
    assert said == [] and lw.watcher is not None and lw.watcher.pid == pid
    assert (status, sentence, folder) == (1, "died", str(tmp_path / "record"))
    assert isinstance(record, dict) and "error" not in record
    assert record["output"]["read_bytes"] == len(b"MemoryError\n")
    assert record["failure_text"] == {"memory": "MemoryError"}
    s = summary(tmp_path)
    assert (s["exit_status"], s["workload_status"], s["diagnosis"]) == (1, 1, "died")
    assert s["command"] == CMD and s["pids_peak_kernel"] == 3
    assert s["started"] == lw.wall


def test_a_failure_finished_before_any_workload_was_told_is_watched_all_the_same(tmp_path):
    lw, said = lazy(tmp_path)
    status, sentence, record, folder = lw.finish(2, "failed", ENDED, EXTRA)
    assert said == [] and (status, sentence) == (2, "failed")
    assert isinstance(record, dict) and "error" not in record
    assert folder == str(tmp_path / "record")


def test_a_watched_run_finishes_with_the_watchs_record(tmp_path, pid):
    lw, said = lazy(tmp_path)
    lw.spawned(pid, [])
    lw.output("stdout", b"Epoch 1/2\n")
    lw.exited()
    status, sentence, record, folder = lw.finish(0, "ok", ENDED, EXTRA)
    assert (status, sentence, folder) == (0, "ok", str(tmp_path / "record"))
    assert isinstance(record, dict) and "error" not in record
    assert record["output"]["read_bytes"] == 10
    s = summary(tmp_path)
    assert s["exit_status"] == 0 and s["growth"] == record and s["samples"] >= 1
    assert s["pids_peak_kernel"] == 3 and s["diagnosis"] == "ok"
    assert said == []


def test_a_watched_run_without_a_record_folder_has_its_record_and_no_folder(tmp_path, pid):
    lw, said = lazy(tmp_path, record=False)
    lw.spawned(pid, [])
    lw.output("stdout", b"hello\n")
    status, sentence, record, folder = lw.finish(0, "ok", ENDED, EXTRA)
    assert (status, sentence, folder) == (0, "ok", None)
    assert isinstance(record, dict) and record["output"]["read_bytes"] == 6
    assert not (tmp_path / "record").exists() and said == []
