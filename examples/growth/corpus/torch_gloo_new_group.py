"""A gloo process group made each iteration with torch.distributed.new_group and never destroyed.

Source: https://github.com/pytorch/pytorch/issues/129868 (pytorch #129868, 2024)
Reporter's words: "this process group uses some pipes and sockets to coordinate, many of which
  are never torn down again, even when the iterator goes out of scope."
Changes for this machine: world size 1 on this host (the report ran it under torchrun): the
  script sets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT itself when they are unset, so
  `python torch_gloo_new_group.py` works as torchrun would; the reporter's 10 iterations
  become --iterations (default 100000). The loop body (new_group, lsof count, print, del,
  gc.collect) is the reporter's.
Grows: open files (~20-36 per second, 4 per printed iteration here) and threads (3 per
  iteration: 759 when it died)
Dies of: nofile 1024 after ~33-51 s here (two runs; "OSError: [Errno 24] Too many open files"
  from subprocess, at iteration ~250)
Prints: "Process 0, iteration N: M open FDs" once per iteration
"""
import argparse
import gc
import os
import subprocess
import time  # noqa: F401 - imported in the report

import torch.distributed as dist


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=100000)
    args = ap.parse_args()
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")

    assert dist.is_available()

    dist.init_process_group()

    for i in range(args.iterations):
        grp = dist.new_group(backend="gloo")

        cmd = ["lsof", "-l", "-p", str(os.getpid())]
        out = subprocess.run(cmd, capture_output=True, text=True)

        print(
            f"Process {dist.get_rank()}, iteration {i + 1}:",
            len(out.stdout.split("\n")),
            "open FDs",
            flush=True,
        )

        del grp
        gc.collect()

        # FDs are not released, even though group should be garbage collected
