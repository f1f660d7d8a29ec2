"""The sampler on real processes, the summary, the plot, and `launcher report`."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import psutil
from click.testing import CliRunner

from launcher.cli.main import app
from launcher.telemetry.plot import plot
from launcher.telemetry.sampler import KEYS, Sampler, sample_tree
from launcher.telemetry.summary import read_series, summarize
from tests.polling import wait_until

runner = CliRunner()
SIX = ("import threading, time\nfor _ in range(5):\n"
       "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
       "print('ready', flush=True)\ntime.sleep(30)\n")


def _start(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_sample_tree_counts_threads_of_the_whole_tree():
    parent = ("import subprocess, sys, time\n"
              f"c = subprocess.Popen([sys.executable, '-c', {SIX!r}], stdout=subprocess.PIPE, "
              "text=True)\nc.stdout.readline()\nprint('ready', flush=True)\ntime.sleep(30)\n")
    p = _start(parent)
    try:
        threads, maps, rss = sample_tree(p.pid)
        assert threads == 1 + 6  # the parent, and the child with its 5 extra threads
        assert maps > 10 and rss > 5 << 20
    finally:
        p.kill()


def test_sampler_rows_and_warning():
    p = _start(SIX)
    out, warnings = io.StringIO(), []
    try:
        s = Sampler(p.pid, out, {"pids_max": 7, "max_map_count": 65530,
                                 "memory_limit_bytes": 1 << 40}, interval=0.05,
                    warn=warnings.append)
        for _ in range(3):  # as the supervisor's loop takes them: when due
            wait_until(s.due, 5, what="a sample due")
            s.sample()
        s.close()
    finally:
        p.kill()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(rows) >= 3
    # a census at a new peak of threads; the frameworks mapped, the first time and each 10 s
    assert set(KEYS) <= set(rows[0]) <= {*KEYS, "census", "loaded", "who"}
    assert rows[0]["census"] == {"unnamed": {psutil.Process(p.pid).name(): 6}}
    assert rows[0]["threads"] == 6 and rows[0]["pids_max"] == 7
    assert warnings == ["threads at 6 reached 85% of pids.max 7"]  # once, not every sample


def test_summary_plot_and_report(tmp_path):
    rows = [{"t": i, "threads": 3 + i, "pids_current": 4 + i, "pids_max": 40, "maps": 100,
             "max_map_count": 65530, "rss_bytes": (10 + i) << 20,
             "memory_limit_bytes": 64 << 20} for i in range(5)]
    (tmp_path / "telemetry.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarize(read_series(tmp_path / "telemetry.jsonl"),
                        {"run_id": "r1", "profile": "base", "framework": "none",
                         "runtime": "native", "command": ["x"], "exit_status": 0,
                         "diagnosis": "the workload exited with status 0.", "engine": {}})
    assert summary["peaks"]["threads"] == {"peak": 7, "limit": 40, "headroom": 33,
                                           "percent": 17.5, "estimate": None}
    assert summary["peaks"]["rss_bytes"]["headroom"] == 50 << 20
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert plot(rows, tmp_path / "telemetry.png", "t")
    assert (tmp_path / "telemetry.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0
    rows_out = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()
                if line.startswith("  ")}
    assert rows_out["threads"] == ["7", "40", "33", "17.5%"]
    assert rows_out["RSS"] == ["14MiB", "64MiB", "50MiB", "21.9%"]
    assert rows_out["pids.current"] == ["8", "40", "32", "20.0%"]
    assert "exit status 0: the workload exited with status 0." in result.stdout
    missing = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "no such file" in missing.stderr


def test_amd_gpu_telemetry_from_sysfs(tmp_path):
    from launcher.telemetry.gpus import GpuSampler

    dev = tmp_path / "sys/class/drm/card0/device"
    dev.mkdir(parents=True)
    (dev / "gpu_busy_percent").write_text("37\n")
    (dev / "mem_info_vram_used").write_text(str(512 << 20))
    (dev / "mem_info_vram_total").write_text(str(8 << 30))
    (tmp_path / "sys/class/drm/renderD128").mkdir()
    g = GpuSampler(tmp_path)
    assert g.any
    assert g.sample() == [{"vendor": "amd", "gpu": 0, "util_percent": 37,
                           "mem_used_bytes": 512 << 20, "mem_total_bytes": 8 << 30}]
    assert not GpuSampler(tmp_path / "none").any
