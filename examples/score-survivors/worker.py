"""Score one chunk of survivors with a small PyTorch model (report 004's Step 3, reduced).

launcher runs this once per chunk, with the chunk in its environment:
LAUNCHER_CHUNK_START / LAUNCHER_CHUNK_END (items [start, end)), LAUNCHER_CHUNK_FILE (its items,
one per line, when the job's items come from a file) and LAUNCHER_CHUNK_OUT (a folder for its
results). The thread and allocator caps are already in place; one GPU is visible when the
profile has GPUs (ROCm or CUDA), else it scores on the CPU.
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path


def items() -> list[int]:
    if os.environ.get("LAUNCHER_CHUNK_FILE"):
        return [int(line) for line in Path(os.environ["LAUNCHER_CHUNK_FILE"]).read_text().split()]
    return list(range(int(os.environ["LAUNCHER_CHUNK_START"]),
                      int(os.environ["LAUNCHER_CHUNK_END"])))


def main() -> None:
    import torch  # framework (and GPU) init: what really costs memory (report 004)

    started = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"  # ROCm builds answer to "cuda"
    ids = torch.tensor(items(), dtype=torch.float64, device=device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1)).to(device)
    # a survivor's features: a deterministic function of its id (a stand-in for its history)
    phases = torch.arange(16, device=device, dtype=torch.float64) + 1.0
    features = torch.sin(ids[:, None] * phases / 9973.0).float()
    with torch.no_grad():
        scores = model(features).squeeze(1).tolist()
    out = Path(os.environ["LAUNCHER_CHUNK_OUT"])
    with (out / "scores.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item", "score"])
        w.writerows((int(i), f"{s:.6f}") for i, s in zip(ids.tolist(), scores, strict=True))
    print(f"scored {len(scores)} items on {device} in {time.time() - started:.2f}s "
          f"({torch.get_num_threads()} threads)", flush=True)


if __name__ == "__main__":
    main()
