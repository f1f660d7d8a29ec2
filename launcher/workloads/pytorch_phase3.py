"""pytorch-phase3: autotune vectorized_envs x batch_size for a policy/value training loop.

A small randomly initialised transformer stands in for the language-model part; a policy head
and a value head train on batches drawn from the vectorised environments' observations. Each
grid point reports samples/s and peak memory; a point is stable when it finished and its peak
stayed under 80% of the memory limit. Writes the best stable point.

    python -m launcher.workloads.pytorch_phase3 [--max-points N] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import Any

from launcher.keys import Key
from launcher.workloads.common import (
    at_least,
    describe_limits,
    env_int,
    limits,
    out_dir,
    peak_rss,
    threads_now,
    write_json,
)
from launcher.workloads.workload import Workload


def make_model(d_model: int, actions: int):  # type: ignore[no-untyped-def]
    import torch
    from torch import nn

    class PolicyValue(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model, nhead=2, dim_feedforward=2 * d_model,
                                               batch_first=True, dropout=0.0)
            self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
            self.policy = nn.Linear(d_model, actions)
            self.value = nn.Linear(d_model, 1)

        def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.encoder(obs).mean(dim=1)
            return self.policy(h), self.value(h).squeeze(-1)

    return PolicyValue()


def run_point(envs: int, batch: int, *, seq: int, d_model: int, seconds: float,
              device: str) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    model = make_model(d_model, 4).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    obs_pool = torch.randn(envs, 16, seq, d_model, device=device)  # 16 steps per environment
    samples, steps, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or steps < 2:
        idx = torch.randint(0, envs * 16, (batch,), device=device)
        obs = obs_pool.view(envs * 16, seq, d_model)[idx]
        target_a = torch.randint(0, 4, (batch,), device=device)
        target_v = torch.randn(batch, device=device)
        logits, value = model(obs)
        loss = torch.nn.functional.cross_entropy(logits, target_a) + \
            torch.nn.functional.mse_loss(value, target_v)
        opt.zero_grad()
        loss.backward()
        opt.step()
        samples += batch
        steps += 1
    elapsed = time.perf_counter() - t0
    gpu_peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return {"vectorized_envs": envs, "batch_size": batch, "samples_per_s": round(samples /
            elapsed, 1), "steps": steps, "loss": loss.item(), "peak_rss": peak_rss(),
            "gpu_peak": gpu_peak, "threads": threads_now()}


WORKLOAD = Workload(
    name="pytorch-phase3",
    description="PyTorch autotuner: vectorized_envs x batch_size, samples/s and peak memory, "
                "best stable point",
    framework="torch", module=__name__,
    profile_keys={"recommended": {
        "vectorized_envs": Key("int", "pytorch-phase3: vectorized environments by default"),
        "batch_size": Key("int", "pytorch-phase3: batch size by default")}},
    variables={"LAUNCHER_VECTORIZED_ENVS": "pytorch-phase3: vectorized_envs when no flag is "
                                           "given",
               "LAUNCHER_BATCH_SIZE": "pytorch-phase3: batch_size when no flag is given"},
    from_keys={"recommended.vectorized_envs": "LAUNCHER_VECTORIZED_ENVS",
               "recommended.batch_size": "LAUNCHER_BATCH_SIZE"})


def parser() -> argparse.ArgumentParser:
    """The workload's flags: the one source for `launcher workloads`, --help and the docs."""
    ap = argparse.ArgumentParser(prog="pytorch-phase3", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-points", type=at_least(1), default=None, metavar="N",
                    help="grid points to try")
    ap.add_argument("--quick", action="store_true", help="a small grid and model")
    ap.add_argument("--out", metavar="DIR", help="results folder (default: this run's folder)")
    ap.add_argument("--vectorized-envs", type=at_least(1), metavar="N",
                    default=env_int("LAUNCHER_VECTORIZED_ENVS", 0) or None,
                    help="run this point only, with --batch-size (default: the profile's "
                         "recommended.vectorized_envs, else the grid)")
    ap.add_argument("--batch-size", type=at_least(1), metavar="N",
                    default=env_int("LAUNCHER_BATCH_SIZE", 0) or None,
                    help="(default: the profile's recommended.batch_size)")
    return ap


def recommendation(result_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """What a run found, for a profile's `recommended` section, and the lines that say why."""
    import json

    r = json.loads((result_dir / "results.json").read_text())
    best = r.get("best")
    if not best:
        raise ValueError("pytorch-phase3 found no stable point")
    return ({"vectorized_envs": best["vectorized_envs"], "batch_size": best["batch_size"]},
            [f"recommended.vectorized_envs and batch_size: the fastest stable point of "
             f"{len(r['points'])} ({best['samples_per_s']:,.0f} samples/s on {r['device']}, "
             f"peak RSS {best['peak_rss'] >> 20} MiB)."])


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    envs_grid, batch_grid = ([4, 16], [16, 64]) if args.quick else ([16, 64, 256],
                                                                     [64, 256, 1024])
    seq, d_model, seconds = (8, 32, 0.5) if args.quick else (32, 128, 5.0)
    grid = list(itertools.product(envs_grid, batch_grid))[: args.max_points]
    if args.vectorized_envs and args.batch_size:  # the recommended point only
        grid = [(args.vectorized_envs, args.batch_size)]
    lim = limits()
    print(f"pytorch-phase3: {len(grid)} points on {device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} intra-op threads; {describe_limits(lim)}", flush=True)
    points = []
    for i, (envs, batch) in enumerate(grid, 1):
        print(f"  cycle {i}/{len(grid)}: envs {envs} x batch {batch}", flush=True)  # growth unit
        try:
            row = run_point(envs, batch, seq=seq, d_model=d_model, seconds=seconds,
                            device=device)
            mem_limit = lim["memory_limit"]
            row["stable"] = not mem_limit or row["peak_rss"] < 0.8 * mem_limit
        except (RuntimeError, MemoryError) as exc:  # e.g. CUDA out of memory
            row = {"vectorized_envs": envs, "batch_size": batch, "stable": False,
                   "error": str(exc).splitlines()[0]}
        points.append(row)
        print(f"  envs {envs:4d} x batch {batch:5d}: "
              + (f"{row['samples_per_s']:>10,.0f} samples/s, peak RSS "
                 f"{row['peak_rss'] >> 20} MiB, {row['threads']} threads"
                 if "samples_per_s" in row else f"failed: {row['error']}")
              + ("" if row["stable"] else "  (unstable)"), flush=True)
    stable = [p for p in points if p["stable"]]
    best = max(stable, key=lambda p: p["samples_per_s"]) if stable else None
    out = out_dir(args.out, "pytorch-phase3")
    write_json(out / "results.json", {"device": device, "points": points, "best": best,
                                      "limits": lim})
    if best:
        print(f"pytorch-phase3: best stable point vectorized_envs={best['vectorized_envs']}, "
              f"batch_size={best['batch_size']} ({best['samples_per_s']:,.0f} samples/s); "
              f"written to {out}/results.json", flush=True)
    return 0 if best else 1


if __name__ == "__main__":
    sys.exit(main())
