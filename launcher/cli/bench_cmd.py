"""`launcher bench-memory SPEC --profile P --sizes 500,1000,2000`: measure the real worker's
peak memory at several chunk sizes, fit it, and write a profile with what was measured."""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json, show_event
from launcher.errors import LauncherError
from launcher.flags import argv_of
from launcher.units import format_size, term
from launcher.usecases.bench_memory import BenchRequest


def bench(req: BenchRequest, *, as_json: bool) -> int:
    from launcher.usecases.bench_memory import bench as measure
    from launcher.usecases.bench_memory import shown

    got = measure(req, on_event=show_event)
    result = got.data
    if as_json:
        print_json(result)
    else:
        for line in _lines(result, req.predict, got.machine):
            print(line)
    if req.write_profile is None:
        return 0
    if not got.written:
        again = _again(req, result)
        raise LauncherError(f"--write-profile: not written: {_beyond(result)}; measure at it: "
                            f"`{again}`")
    if not as_json:
        print(f"wrote {req.write_profile} (workers.memory, jobs.chunk_size and the fit; no "
              f"max_concurrent: the machine that runs the job sets it): `launcher jobs plan "
              f"{shlex.quote(str(req.spec))} --profile {shlex.quote(shown(req.write_profile))}`")
    return 0


def _lines(result: dict[str, Any], predict: int | None, machine: str) -> list[str]:
    out = [_fit_line(result)]
    if predict:
        peak = result["predicted_peak_bytes"]
        out.append(f"predicted peak at {predict} items: {format_size(peak)}" if peak is not None
                   else f"no prediction at {predict} items: more than the largest size "
                        f"measured ({result['largest_size']}), with no per-item cost")
    conc = result.get("concurrent")
    if conc:
        what = "their cgroups" if conc["source"] == "cgroup" else "tree RSS: no cgroups"
        out.append(f"{conc['workers']} workers of {conc['size']} items at once ({what}): the "
                   f"peak of their total {format_size(conc['peak_of_total_bytes'])}, the sum of "
                   f"their own peaks {format_size(conc['sum_of_peaks_bytes'])}"
                   + (f"; tree RSS total {format_size(conc['rss_peak_of_total_bytes'])}, for "
                      f"reference only" if conc["source"] == "cgroup" else ""))
    if result["chunk_size"] is None:
        out.append(f"chunk_size {result['spec_chunk_size']}: no limit for it: {_beyond(result)}")
    else:
        out.append(f"chunk_size {result['chunk_size']}: predicted peak "
                   f"{format_size(result['predicted_chunk_peak_bytes'])}; workers.memory "
                   f"{result['workers_memory']} (x{result['margin']}); at most "
                   f"{result['concurrency_binding']} on the machine of profile {machine} (not "
                   f"written: `jobs plan` works it out there)")
    return out


def _fit_line(result: dict[str, Any]) -> str:
    if result["refused"]:
        return (f"fit: no per-item cost, refused: {result['refused']}; a chunk's peak is taken "
                f"as the largest measured, {format_size(result['base_bytes'])}, for chunks of "
                f"at most {result['largest_size']} items")
    return (f"fit: peak = {format_size(result['base_bytes'])} "
            f"{term(result['per_item_bytes'], 'bytes')} x items (largest error "
            f"{result['fit_error']:.1%} at the measured sizes)")


def _beyond(result: dict[str, Any]) -> str:
    return (f"the spec's chunk_size {result['spec_chunk_size']} is more than the largest size "
            f"measured ({result['largest_size']}), and with no per-item cost nothing predicts "
            f"its peak")


def _again(req: BenchRequest, result: dict[str, Any]) -> str:
    """The same bench-memory with the spec's chunk size among the sizes."""
    wanted = tuple(sorted({*req.sizes, int(result["spec_chunk_size"])}))
    return shlex.join(["launcher", "bench-memory",
                       *argv_of(dataclasses.replace(req, sizes=wanted))])


COMMAND = command("bench-memory", BenchRequest, bench, own=(JSON,), help="""Measure a job's real
worker (framework and GPU init included) at several chunk sizes, each in its own capped cgroup;
fit peak = base + per_item x size and report its error.""")
