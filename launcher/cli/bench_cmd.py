"""`launcher bench-memory SPEC --profile P --sizes 500,1000,2000`: measure the real worker's
peak memory at several chunk sizes, fit it, and write a profile with what was measured."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from launcher.cli.output import parse_env_pairs, print_json, show_event
from launcher.errors import LauncherError
from launcher.units import format_size, term


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise LauncherError(f"--sizes: expected item counts such as 500,1000,2000 "
                            f"(got {text!r})") from None
    if len(sizes) < 2 or any(s < 1 for s in sizes):
        raise LauncherError(f"--sizes: give at least two positive item counts (got {text!r})")
    return sizes


def bench(spec: Path, *, profile: str | None, sizes_text: str, predict: int | None,
          concurrent: int | None, write_profile: Path | None, env: list[str] | None,
          as_json: bool, host_root: Path | None, gpus: str | None = None) -> int:
    from launcher.usecases.bench_memory import BenchRequest, shown
    from launcher.usecases.bench_memory import bench as measure

    sizes = parse_sizes(sizes_text)
    got = measure(BenchRequest(spec=spec, sizes=tuple(sizes), profile=profile, predict=predict,
                               concurrent=concurrent, write_profile=write_profile,
                               env=parse_env_pairs(env), host_root=host_root, gpus=gpus),
                  on_event=show_event)
    result = got.data
    if as_json:
        print_json(result)
    else:
        for line in _lines(result, predict, got.machine):
            print(line)
    if write_profile is None:
        return 0
    if not got.written:
        again = _again(spec, sizes, result, profile=profile, gpus=gpus,
                       write_profile=write_profile)
        raise LauncherError(f"--write-profile: not written: {_beyond(result)}; measure at it: "
                            f"`{again}`")
    if not as_json:
        print(f"wrote {write_profile} (workers.memory, jobs.chunk_size and the fit; no "
              f"max_concurrent: the machine that runs the job sets it): `launcher jobs plan "
              f"{shlex.quote(str(spec))} --profile {shlex.quote(shown(write_profile))}`")
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


def _again(spec: Path, sizes: list[int], result: dict[str, Any], *, profile: str | None,
           gpus: str | None, write_profile: Path) -> str:
    """The same bench-memory with the spec's chunk size among the sizes."""
    wanted = sorted({*sizes, int(result["spec_chunk_size"])})
    argv = ["launcher", "bench-memory", str(spec), "--sizes", ",".join(map(str, wanted))]
    if profile:
        argv += ["--profile", profile]
    if gpus:
        argv += ["--gpus", gpus]
    return shlex.join([*argv, "--write-profile", str(write_profile)])
