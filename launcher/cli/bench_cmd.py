"""`launcher bench-memory SPEC --profile P --sizes 500,1000,2000`: measure the real worker's
peak memory at several chunk sizes, fit it, and write a profile with what was measured."""

from __future__ import annotations

from pathlib import Path

from launcher.cli.output import parse_env_pairs, print_json, say
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


def bench(spec: Path, profile: str | None, sizes_text: str, predict: int | None,
          concurrent: int | None, write_profile: Path | None, env: list[str] | None,
          as_json: bool, host_root: Path | None, gpus: str | None = None) -> int:
    from launcher.jobs import memory
    from launcher.jobs.job import prepare, read_items

    sizes = parse_sizes(sizes_text)
    p = prepare(spec, profile, None, None, parse_env_pairs(env), host_root, gpus=gpus,
                running=True)
    if write_profile is not None:
        from launcher.profiles.writer import check_target

        check_target(write_profile, p.resolved.profile, "--write-profile")
    folder = p.spec.folder() / "bench-memory"
    folder.mkdir(parents=True, exist_ok=True)
    items = read_items(p.spec)
    where = f"GPU {p.plan.gpus[0]}" if p.plan.gpus[0] is not None else "the CPU"
    say(f"bench-memory {p.spec.name}: sizes {', '.join(map(str, sizes))} on {where}, each "
         f"alone in its own cgroup (cap {format_size(p.plan.usable_bytes or 0) or '-'})")
    ms = memory.measure(p, sizes, folder, items, say)
    conc = None
    if concurrent:
        size = p.spec.chunk_size or max(sizes)
        say(f"{concurrent} workers of {size} items at once ...")
        conc = memory.measure_concurrent(p, size, concurrent, folder, items)
    # the chunk size and concurrency for the profile's machine (its GPUs), not this host's
    target = prepare(spec, profile, None, None, parse_env_pairs(env), host_root,
                     on_this_host=False)
    result = memory.result_of(p, ms, predict, conc, target)
    if write_profile is not None:
        memory.write_profile(p, write_profile, result)
        result["profile_written"] = str(write_profile)
    if as_json:
        print_json(result)
        return 0
    print(f"fit: peak = {format_size(result['base_bytes'])} "
          f"{term(result['per_item_bytes'], 'bytes')} x items (largest error "
          f"{result['fit_error']:.1%} at the measured sizes)")
    if predict:
        print(f"predicted peak at {predict} items: "
              f"{format_size(result['predicted_peak_bytes'])}")
    if conc:
        what = "their cgroups" if conc["source"] == "cgroup" else "tree RSS: no cgroups"
        print(f"{conc['workers']} workers of {conc['size']} items at once ({what}): the peak "
              f"of their total {format_size(conc['peak_of_total_bytes'])}, the sum of their "
              f"own peaks {format_size(conc['sum_of_peaks_bytes'])}"
              + (f"; tree RSS total {format_size(conc['rss_peak_of_total_bytes'])}, for "
                 f"reference only" if conc["source"] == "cgroup" else ""))
    print(f"chunk_size {result['chunk_size']}: predicted peak "
          f"{format_size(result['predicted_chunk_peak_bytes'])}; workers.memory "
          f"{result['workers_memory']} (x{result['margin']}); at most "
          f"{result['concurrency_binding']} on the machine of profile "
          f"{target.resolved.profile.name} (not written: `jobs plan` works it out there)")
    if write_profile is not None:
        from launcher.profiles.writer import shown

        print(f"wrote {write_profile} (workers.memory, jobs.chunk_size and the fit; no "
              f"max_concurrent: the machine that runs the job sets it): `launcher jobs plan "
              f"{spec} --profile {shown(write_profile)}`")
    return 0
