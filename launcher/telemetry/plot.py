"""Draw RUN_DIR/telemetry.png from its samples: in the background at the end of a run
(`python -m launcher.telemetry RUN_DIR`), or in place through `launcher report --plot`.

One panel per series against its limit, and two for GPUs when the samples have any. A limit
more than FAR times a panel's peak would squash the data into a flat line at the bottom: it is
written above the panel instead of drawn, and the panel is scaled to the data.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List

from launcher.telemetry.summary import GpuKey, gpu_series, read_series
from launcher.units import format_size

FAR = 4.0
GPU_COLORS = ("tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
              "tab:cyan", "tab:gray")
Values = List[float]


@dataclass
class Line:
    label: str
    values: Values
    color: str
    width: float = 1.5


@dataclass
class Limit:
    """A limit over time, in words (`pids.max`), and the peak of what it bounds."""

    label: str
    values: Values
    peak: float
    color: str = "tab:red"
    warn_line: bool = True  # the 80% line, where the sampler warns
    is_bytes: bool = False

    @property
    def last(self) -> float:
        return next((v for v in reversed(self.values) if not math.isnan(v)), math.nan)

    @property
    def named(self) -> str:
        """`vm.max_map_count 65,530`, `memory limit 2GiB`."""
        value = format_size(int(self.last)) if self.is_bytes else f"{int(self.last):,}"
        return f"{self.label} {value}"

    def text(self) -> str:
        return f"{self.named} ({_percent(100 * self.peak / self.last)} used at peak)"


@dataclass
class Panel:
    title: str
    unit: str  # "bytes" is drawn in MiB or GiB, whichever fits
    lines: list[Line]
    limits: list[Limit] = field(default_factory=list)
    marks: list[tuple[str, float]] = field(default_factory=list)  # (label, y): the estimate
    top: float | None = None  # a fixed top: 105 shows 0-100% whole

    @property
    def peak(self) -> float:
        drawn = [v for ln in self.lines for v in ln.values if not math.isnan(v)]
        return max(drawn + [y for _, y in self.marks], default=0.0)

    def far(self, limit: Limit) -> bool:
        return limit.last > FAR * self.peak


def _percent(p: float) -> str:
    return f"{p:.0f}%" if p >= 10 else f"{p:.1f}%" if p >= 1 else f"{p:.2g}%"


def _col(rows: list[dict[str, Any]], key: str) -> Values:
    return [math.nan if r.get(key) is None else float(r[key]) for r in rows]


def _limit(rows: list[dict[str, Any]], key: str, label: str, bounded: list[Values],
           is_bytes: bool = False) -> list[Limit]:
    values = [math.nan if not r.get(key) else float(r[key]) for r in rows]
    if all(math.isnan(v) for v in values):
        return []
    peak = max((v for vs in bounded for v in vs if not math.isnan(v)), default=0.0)
    return [Limit(label, values, peak, is_bytes=is_bytes)]


def cpu_panels(rows: list[dict[str, Any]], estimate: int | None) -> list[Panel]:
    threads, maps, rss = _col(rows, "threads"), _col(rows, "maps"), _col(rows, "rss_bytes")
    tasks = [Line("threads (all processes)", threads, "tab:blue")]
    if any(r.get("pids_current") is not None for r in rows):
        tasks[0].width = 3.0  # visible under pids.current, which is often the same count
        tasks.append(Line("pids.current (the cgroup)", _col(rows, "pids_current"), "tab:green"))
    return [
        Panel("threads and pids", "tasks", tasks,
              _limit(rows, "pids_max", "pids.max", [ln.values for ln in tasks]),
              [(f"plan's estimate {estimate}", float(estimate))] if estimate else []),
        Panel("memory maps (largest process)", "maps",
              [Line("memory maps", maps, "tab:blue")],
              _limit(rows, "max_map_count", "vm.max_map_count", [maps])),
        Panel("resident memory (RSS)", "bytes", [Line("RSS (all processes)", rss, "tab:blue")],
              _limit(rows, "memory_limit_bytes", "memory limit", [rss], is_bytes=True)),
    ]


def _gpu_col(readings: list[dict[str, Any] | None], key: str) -> Values:
    return [math.nan if g is None else float(g[key]) for g in readings]


def gpu_panels(rows: list[dict[str, Any]], names: Mapping[GpuKey, str]) -> list[Panel]:
    """Utilisation and memory, one line per GPU; [] when no sample has a GPU."""
    util, used, totals = [], [], []
    for i, ((vendor, index), readings) in enumerate(gpu_series(rows).items()):
        color = GPU_COLORS[i % len(GPU_COLORS)]
        name = names.get((vendor, index))
        util.append(Line(f"GPU {index}" + (f" ({name})" if name else ""),
                         _gpu_col(readings, "util_percent"), color))
        used.append(Line(f"GPU {index} memory used", _gpu_col(readings, "mem_used_bytes"),
                         color))
        totals.append((index, _gpu_col(readings, "mem_total_bytes")))
    if not util:
        return []
    return [Panel("GPU utilisation", "%", util, top=105.0),
            Panel("GPU memory used against total", "bytes", used, _gpu_totals(totals, used))]


def _gpu_totals(totals: list[tuple[int, Values]], used: list[Line]) -> list[Limit]:
    """One limit per distinct memory total: five GPUs of 4 GiB draw one line, not five."""
    groups: dict[float, list[int]] = {}
    for i, (_, values) in enumerate(totals):
        groups.setdefault(max(v for v in values if not math.isnan(v)), []).append(i)
    limits = []
    for members in groups.values():
        ids = ", ".join(str(totals[i][0]) for i in members)
        peak = max(v for i in members for v in used[i].values if not math.isnan(v))
        limits.append(Limit(f"GPU{'s' if len(members) > 1 else ''} {ids} memory total",
                            totals[members[0]][1], peak,
                            used[members[0]].color if len(members) == 1 else "tab:gray",
                            warn_line=False, is_bytes=True))
    return limits


def _byte_scale(top: float) -> tuple[float, str]:
    return (1 / 2**30, "GiB") if top >= 2 * 2**30 else (1 / 2**20, "MiB")


def _draw(ax: Any, t: Values, panel: Panel) -> None:
    near = [lim for lim in panel.limits if not panel.far(lim)]
    far = [lim for lim in panel.limits if panel.far(lim)]
    top = max([panel.peak] + [lim.last for lim in near])  # of what is drawn
    scale, unit = _byte_scale(top) if panel.unit == "bytes" else (1.0, panel.unit)
    for ln in panel.lines:
        ax.plot(t, [v * scale for v in ln.values], color=ln.color, lw=ln.width, label=ln.label)
    for lim in near:
        ax.plot(t, [v * scale for v in lim.values], "--", color=lim.color, label=lim.named)
        if lim.warn_line:
            ax.axhline(0.8 * lim.last * scale, ls=":", color="tab:orange",
                       label=f"80% of {lim.label}")
    for label, y in panel.marks:
        ax.axhline(y, ls="-.", color="tab:purple", label=label)
    if far:  # beside the title, where no data can be
        ax.text(1.0, 1.02, "limit off the scale: " + "; ".join(lim.text() for lim in far),
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="tab:red")
    ax.set_ylim(0, panel.top or 1.08 * top * scale or None)  # room above the highest line
    ax.set_ylabel(unit)
    ax.set_title(panel.title, fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def growth_panels(growth: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per growing series: its floor and peak per cycle, and the projected line to its limit."""
    if not growth or not growth.get("unit"):
        return []
    out = []
    for t in growth.get("trends") or []:
        if not t.get("grows") or not t.get("limit"):
            continue  # no limit to run into: the report's table says it
        key = t["series"]
        got = [c for c in growth.get("cycles") or [] if key in c["floor"]]
        last = next((c for c in got if c["n"] == t["last"]), got[-1] if got else None)
        if last is None:
            continue
        end = t["reached"] if t.get("reached") is not None else last["n"]
        far = end > 3 * max(last["n"], 1)  # a line to a cycle far off would hide the points
        end = min(end, 3 * max(last["n"], 1))
        out.append({"series": key, "unit": growth["unit"], "n": [c["n"] for c in got],
                    "floor": [c["floor"][key] for c in got],
                    "peak": [c["peak"][key] for c in got],
                    "line": ([last["n"], end],
                             [last["floor"][key], last["floor"][key] + t["per_cycle"] *
                              (end - last["n"])]),
                    "limit": None if far else t.get("limit"),
                    "reached": None if far else t.get("reached"),
                    "far": t.get("reached") if far else None})
    return out


def _draw_growth(ax: Any, g: dict[str, Any]) -> None:
    from launcher.telemetry.growth_words import show
    from launcher.telemetry.series import SERIES

    s = SERIES[g["series"]]
    tops = [*g["peak"], *g["line"][1]] + ([g["limit"]] if g["limit"] else [])
    if g["far"] is not None:  # beside the title, where no data can be
        ax.text(1.0, 1.02, f"{s.limit_word} off the scale: reached in {g['unit']} "
                f"~{g['far']}", transform=ax.transAxes, ha="right", va="bottom", fontsize=8,
                color="tab:red")
    scale, unit = _byte_scale(max(tops)) if s.in_bytes else (1.0, s.word)
    ax.plot(g["n"], [v * scale for v in g["floor"]], "o", color="tab:blue",
            label=f"least in a {g['unit']}: kept")
    ax.plot(g["n"], [v * scale for v in g["peak"]], "^", color="tab:cyan",
            label=f"most in a {g['unit']}")
    xs, ys = g["line"]
    ax.plot(xs, [v * scale for v in ys], "-", color="tab:orange", label="projected")
    if g["limit"]:
        ax.axhline(g["limit"] * scale, ls="--", color="tab:red",
                   label=f"{s.limit_word} {show(g['series'], g['limit'])}")
    if g["reached"] is not None:
        ax.axvline(g["reached"], ls=":", color="tab:red",
                   label=f"reached in {g['unit']} ~{g['reached']}")
    ax.set_ylabel(unit)
    ax.set_xlabel(g["unit"])
    ax.set_title(f"{s.word} per {g['unit']}: growth and its projection", fontsize=9,
                 loc="left")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def figure(rows: list[dict[str, Any]], title: str, threads_estimate: int | None = None,
           gpu_names: Mapping[GpuKey, str] | None = None,
           growth: dict[str, Any] | None = None) -> Any:
    """The matplotlib Figure of the samples (matplotlib imported by the caller's check),
    and a panel per growing series over its cycles."""
    import matplotlib.pyplot as plt

    panels = cpu_panels(rows, threads_estimate) + gpu_panels(rows, gpu_names or {})
    grown = growth_panels(growth)
    count = len(panels) + len(grown)
    fig, axes = plt.subplots(count, 1, figsize=(11, 1.2 + 2.1 * count), squeeze=False)
    t = [float(r["t"]) for r in rows]
    for ax, panel in zip(axes[:len(panels), 0], panels):
        _draw(ax, t, panel)
        ax.set_xlim(min(t), max(t))
    axes[len(panels) - 1, 0].set_xlabel("seconds")
    for ax, g in zip(axes[len(panels):, 0], grown):
        _draw_growth(ax, g)
    fig.suptitle(textwrap.fill(title, 130), fontsize=9)
    fig.tight_layout()
    return fig


def plot(rows: list[dict[str, Any]], path: Path, title: str,
         threads_estimate: int | None = None,
         gpu_names: Mapping[GpuKey, str] | None = None,
         growth: dict[str, Any] | None = None) -> bool:
    """telemetry.png: each series against its limit. False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig = figure(rows, title, threads_estimate, gpu_names, growth)
    fig.savefig(path, dpi=90, format="png")
    plt.close(fig)
    return True


def draw(run_dir: Path) -> bool:
    rows = read_series(run_dir / "telemetry.jsonl")
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        title = f"{run_dir.name}: {summary.get('diagnosis', '')}"
        estimate = (summary.get("threads_estimate") or {}).get("total")
        names = {(g["vendor"], g["gpu"]): g["name"] for g in summary.get("gpus") or ()
                 if g.get("name")}
        growth = summary.get("growth")
    except (OSError, ValueError, KeyError, TypeError):
        title, estimate, names, growth = run_dir.name, None, {}, None
    tmp = run_dir / ".telemetry.png.tmp"
    if len(rows) < 2 or not plot(rows, tmp, title, estimate, names, growth):
        return False
    tmp.replace(run_dir / "telemetry.png")  # whole or not at all
    return True
