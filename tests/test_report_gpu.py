"""GPU use in summary.json, `launcher report` and telemetry.png; limits far above the data
written as text. Fixtures: telemetry.jsonl as the sampler writes it (NVML's integer utilisation
and byte counts), a GPU run (one H100, stress-jax-like) and a CPU-only one."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import matplotlib
import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from launcher.telemetry import plot as plot_module
from launcher.telemetry.plot import draw, figure
from launcher.telemetry.sampler import KEYS
from launcher.telemetry.summary import GpuKey, read_series, summarize

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures/telemetry"
H100 = {("nvidia", 0): "NVIDIA H100 80GB HBM3"}
MiB = 1 << 20
runner = CliRunner()
SAMPLER_KEY = re.compile(r"(?<!vm\.)\b(" + "|".join(  # those that are not words (`threads` is)
    [k for k in KEYS if "_" in k] + ["util_percent", "mem_used_bytes", "mem_total_bytes"])
    + r")\b")


def _meta(run_id: str, estimate: int) -> dict[str, Any]:
    return {"run_id": run_id, "profile": "base", "framework": "jax", "runtime": "native",
            "command": ["x"], "exit_status": 0, "engine": {},
            "diagnosis": "the workload exited with status 0.",
            "threads_estimate": {"total": estimate}}


@pytest.fixture
def gpu_run(tmp_path: Path) -> Path:
    shutil.copy(FIXTURES / "gpu-run/telemetry.jsonl", tmp_path)
    summary = summarize(read_series(tmp_path / "telemetry.jsonl"), _meta("gpu-run", 110), H100)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return tmp_path


@pytest.fixture
def figures() -> Any:
    made: list[Any] = []

    def make(name: str, estimate: int, names: dict[GpuKey, str] | None = None) -> Any:
        made.append(figure(read_series(FIXTURES / name / "telemetry.jsonl"), name, estimate,
                           names))
        return {ax.get_title(loc="left"): ax for ax in made[-1].axes}

    yield make
    for fig in made:
        plt.close(fig)


def _labels(ax: Any) -> list[str]:
    return [ln.get_label() for ln in ax.get_lines()]


def _texts(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_summary_has_each_gpus_peaks():
    rows = read_series(FIXTURES / "gpu-run/telemetry.jsonl")
    assert summarize(rows, _meta("r", 110), H100)["gpus"] == [{
        "vendor": "nvidia", "gpu": 0, "name": "NVIDIA H100 80GB HBM3", "samples": 8,
        "util_peak_percent": 27, "util_mean_percent": 11.1,  # (3 + 27 + 24 + 26 + 9) / 8
        "memory_peak_bytes": 61849 * MiB, "memory_total_bytes": 81559 * MiB,
        "memory_percent": 75.8}]
    assert summarize(read_series(FIXTURES / "cpu-run/telemetry.jsonl"), _meta("r", 11))[
        "gpus"] == []


def test_summary_counts_each_gpus_own_samples():
    def gpu(i: int, util: int) -> dict[str, Any]:
        return {"vendor": "nvidia", "gpu": i, "util_percent": util,
                "mem_used_bytes": (util + 1) * MiB, "mem_total_bytes": 100 * MiB}

    rows = [{"t": 0.0, "gpus": [gpu(1, 40), gpu(0, 10)]}, {"t": 1.0, "gpus": [gpu(0, 20)]},
            {"t": 2.0, "gpus": []}]
    got = [(g["gpu"], g["name"], g["samples"], g["util_peak_percent"], g["util_mean_percent"],
            g["memory_percent"]) for g in summarize(rows, {})["gpus"]]
    assert got == [(0, None, 2, 20, 15.0, 21.0), (1, None, 1, 40, 40.0, 41.0)]


def test_report_shows_one_row_per_gpu(gpu_run: Path, tmp_path_factory: pytest.TempPathFactory):
    out = runner.invoke(app, ["report", str(gpu_run)])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["gpu"])
    assert lines[header].split() == ["gpu", "util", "peak", "util", "mean", "memory", "peak",
                                     "total", "use", "samples"]
    assert lines[header + 1].split() == ["GPU", "0", "(NVIDIA", "H100", "80GB", "HBM3)", "27%",
                                         "11.1%", "60.4GiB", "79.6GiB", "75.8%", "8"]
    as_json = json.loads(runner.invoke(app, ["report", str(gpu_run), "--json"]).stdout)
    assert as_json["gpus"][0]["memory_peak_bytes"] == 61849 * MiB
    cpu = tmp_path_factory.mktemp("cpu")
    summary = summarize(read_series(FIXTURES / "cpu-run/telemetry.jsonl"), _meta("cpu", 11))
    (cpu / "summary.json").write_text(json.dumps(summary))
    text = runner.invoke(app, ["report", str(cpu)]).stdout
    assert "GPU" not in text and "gpu" not in text


def test_plot_has_gpu_panels_only_with_gpu_samples(figures: Any):
    gpu = figures("gpu-run", 110, H100)
    assert list(gpu) == ["threads and pids", "memory maps (largest process)",
                         "resident memory (RSS)", "GPU utilisation",
                         "GPU memory used against total"]
    assert _labels(gpu["GPU utilisation"]) == ["GPU 0 (NVIDIA H100 80GB HBM3)"]
    assert max(gpu["GPU utilisation"].get_lines()[0].get_ydata()) == 27
    memory = gpu["GPU memory used against total"]
    assert _labels(memory) == ["GPU 0 memory used", "GPU 0 memory total 79.6GiB"]
    assert memory.get_ylabel() == "GiB"
    assert max(memory.get_lines()[0].get_ydata()) == pytest.approx(61849 / 1024)
    assert list(figures("cpu-run", 11)) == ["threads and pids", "memory maps (largest process)",
                                            "resident memory (RSS)"]


def test_far_limit_is_text_and_the_panel_fits_the_data(figures: Any):
    gpu = figures("gpu-run", 110, H100)
    maps, rss = gpu["memory maps (largest process)"], gpu["resident memory (RSS)"]
    assert _labels(maps) == ["memory maps"]  # no line at 8.2 M to squash 9,120 maps
    assert _texts(maps) == ["limit off the scale: vm.max_map_count 8,200,000 "
                            "(0.11% used at peak)"]
    assert maps.get_ylim() == (0, pytest.approx(1.08 * 9120))  # the data's peak, and room
    assert _labels(rss) == ["RSS (all processes)"]
    assert _texts(rss) == ["limit off the scale: memory limit 126GiB (5.0% used at peak)"]
    assert rss.get_ylabel() == "GiB" and rss.get_ylim()[1] == pytest.approx(1.08 * 6451 / 1024)
    threads = gpu["threads and pids"]  # pids.max 130 is near the peak, 117: drawn
    assert _labels(threads) == ["threads (all processes)", "pids.current (the cgroup)",
                                "pids.max 130", "80% of pids.max", "plan's estimate 110"]
    assert _texts(threads) == []
    cpu = figures("cpu-run", 11)
    assert _labels(cpu["resident memory (RSS)"])[1:] == ["memory limit 2GiB",
                                                         "80% of memory limit"]
    assert _texts(cpu["memory maps (largest process)"]) == [
        "limit off the scale: vm.max_map_count 65,530 (0.53% used at peak)"]


def test_small_rss_under_a_large_host_is_drawn_in_mib():
    rows = [{"t": float(i), "threads": 3, "maps": 200, "max_map_count": 65530,
             "rss_bytes": (100 + 100 * i) * MiB, "memory_limit_bytes": 126 << 30}
            for i in range(3)]
    fig = figure(rows, "cpu on a 126 GiB host")
    rss = {ax.get_title(loc="left"): ax for ax in fig.axes}["resident memory (RSS)"]
    plt.close(fig)
    assert rss.get_ylabel() == "MiB" and 300 <= rss.get_ylim()[1] < 600
    assert _texts(rss) == ["limit off the scale: memory limit 126GiB (0.23% used at peak)"]


def test_gpus_with_the_same_total_share_one_limit_line():
    def gpu(i: int, used_gib: float) -> dict[str, Any]:
        return {"vendor": "nvidia", "gpu": i, "util_percent": 50,
                "mem_used_bytes": int(used_gib * 2**30), "mem_total_bytes": 4 << 30}

    rows = [{"t": float(t), "threads": 3, "gpus": [gpu(0, 1 + t), gpu(1, 2 + t)]}
            for t in range(2)]
    fig = figure(rows, "two GTX 1650")
    memory = fig.axes[-1]
    plt.close(fig)
    assert _labels(memory) == ["GPU 0 memory used", "GPU 1 memory used",
                               "GPUs 0, 1 memory total 4GiB"]


def test_legends_are_words_not_keys(figures: Any):
    for ax in [*figures("gpu-run", 110, H100).values(), *figures("cpu-run", 11).values()]:
        words = _labels(ax) + [t.get_text() for t in ax.get_legend().get_texts()] + _texts(ax)
        keys = [w for w in words if SAMPLER_KEY.search(w)]  # vm.max_map_count is a word
        assert words and not keys, ax.get_title(loc="left")


def test_draw_names_gpus_from_the_summary(gpu_run: Path, monkeypatch: pytest.MonkeyPatch):
    seen = []

    def spy(rows: list[dict[str, Any]], title: str, estimate: int | None,
            names: dict[GpuKey, str], growth: dict[str, Any] | None = None) -> Any:
        seen.append((title, estimate, names))
        return make_figure(rows, title, estimate, names, growth)

    make_figure = plot_module.figure
    monkeypatch.setattr(plot_module, "figure", spy)
    assert draw(gpu_run)
    assert (gpu_run / "telemetry.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert seen == [(f"{gpu_run.name}: the workload exited with status 0.", 110, H100)]


def test_run_summary_names_gpus_from_the_host_facts(tmp_path: Path):
    from types import SimpleNamespace

    from launcher.runtime.engine import Enforcement
    from launcher.runtime.session import write_summary
    from launcher.vendors.base import Gpu

    shutil.copy(FIXTURES / "gpu-run/telemetry.jsonl", tmp_path)
    r = SimpleNamespace(caps=SimpleNamespace(profile="base", estimate=SimpleNamespace(
            to_json=lambda: {"total": 110})),
                        framework="jax", facts=SimpleNamespace(gpus=[
                            Gpu("nvidia", 0, "NVIDIA H100 80GB HBM3", 81559 * MiB)]))
    result = SimpleNamespace(status=0, enforcement=Enforcement())
    summary = write_summary(tmp_path, r, engine=SimpleNamespace(name="native"),  # type: ignore[arg-type]
                            result=result, command=["x"],  # type: ignore[arg-type]
                            diagnosis="the workload exited with status 0.", started=0.0)
    assert [(g["name"], g["util_peak_percent"]) for g in summary["gpus"]] == [
        ("NVIDIA H100 80GB HBM3", 27)]
    assert json.loads((tmp_path / "summary.json").read_text())["gpus"] == summary["gpus"]


def test_report_of_a_run_whose_launcher_was_killed(tmp_path: Path):
    """kill -9 of launcher leaves telemetry.jsonl but no summary.json: report still shows the
    peaks, and says why there is no summary."""
    from click.testing import CliRunner

    from launcher.cli.main import app

    run_dir = tmp_path / "k9"
    run_dir.mkdir()
    shutil.copy(FIXTURES / "cpu-run/telemetry.jsonl", run_dir)
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "launcher ended before the run did (killed?): no summary.json" in result.stdout
    assert CliRunner().invoke(app, ["report", str(tmp_path)]).exit_code == 1  # not a run


def test_report_of_a_summary_older_than_its_gpu_rows(tmp_path: Path):
    """A summary.json written before it had per-GPU rows (no "gpus" key) beside a telemetry.jsonl
    with GPU samples: the report computes the rows from the samples, one per GPU."""
    run_dir = tmp_path / "old-gpu-run"
    run_dir.mkdir()
    rows = read_series(FIXTURES / "gpu-run/telemetry.jsonl")
    second = [{**r, "gpus": [*r["gpus"], {**r["gpus"][0], "gpu": 1, "util_percent": 50,
                                            "mem_used_bytes": 1024 * MiB}]} for r in rows]
    (run_dir / "telemetry.jsonl").write_text("".join(json.dumps(r) + "\n" for r in second))
    old = summarize(second, _meta("old-gpu-run", 110))
    del old["gpus"]  # the older format
    (run_dir / "summary.json").write_text(json.dumps(old))
    out = runner.invoke(app, ["report", str(run_dir)])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["gpu"])
    assert [line.split() for line in lines[header + 1:header + 3]] == [
        ["GPU", "0", "(nvidia)", "27%", "11.1%", "60.4GiB", "79.6GiB", "75.8%", "8"],
        ["GPU", "1", "(nvidia)", "50%", "50.0%", "1GiB", "79.6GiB", "1.3%", "8"]]
    assert not lines[header + 3].startswith("GPU")
    as_json = json.loads(runner.invoke(app, ["report", str(run_dir), "--json"]).stdout)
    assert [g["util_peak_percent"] for g in as_json["gpus"]] == [27, 50]
