"""Two GPU loops that grow, cycle after cycle, for the census and the growth docs.

    python3 gpu_cycles.py torch-groups --cycles 12   # a process group per cycle, kept
    python3 gpu_cycles.py jax-shapes --cycles 10     # a new shape compiled per cycle

torch-groups: one rank (NCCL on a GPU, gloo without one) makes a new process group each cycle,
all-reduces on it and keeps it, as a script that builds its groups inside the loop: each NCCL
group keeps a watchdog and a heartbeat thread (pt_nccl_watchdg, pt_nccl_heartbt) and NCCL's
own. jax-shapes: each cycle jits a function for a new input shape and keeps its result, so the
compile cache and the arrays grow. Each cycle prints `cycle N/M`, flushed.
"""

from __future__ import annotations

import argparse
import sys
import time

kept: list[object] = []


def torch_groups(cycles: int, seconds: float, port: int) -> None:
    import torch
    import torch.distributed as dist

    gpu = torch.cuda.is_available()
    if gpu:
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if gpu else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)
    device = "cuda" if gpu else "cpu"
    for n in range(1, cycles + 1):
        print(f"cycle {n}/{cycles}", flush=True)
        group = dist.new_group([0])
        x = torch.ones(1 << 20, device=device)
        dist.all_reduce(x, group=group)
        if gpu:
            torch.cuda.synchronize()
        kept.append((group, x))
        time.sleep(seconds)
    dist.destroy_process_group()


def jax_shapes(cycles: int, seconds: float) -> None:
    import jax
    import jax.numpy as jnp

    for n in range(1, cycles + 1):
        print(f"cycle {n}/{cycles}", flush=True)
        size = 256 + 64 * n  # a new shape: a new compilation
        f = jax.jit(lambda a: jnp.tanh(a @ a.T).sum(axis=0))
        kept.append(f(jnp.ones((size, size))).block_until_ready())
        kept.append(f)
        time.sleep(seconds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loop", choices=("torch-groups", "jax-shapes"))
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    if a.loop == "torch-groups":
        torch_groups(a.cycles, a.seconds, a.port)
    else:
        jax_shapes(a.cycles, a.seconds)
    print(f"finished {a.cycles} cycles", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
