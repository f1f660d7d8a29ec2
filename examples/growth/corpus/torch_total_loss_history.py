"""A training-statistics loop that sums loss tensors, not numbers: every step's graph stays alive.

Source: https://pytorch.org/docs/master/notes/faq.html ("My model reports cuda runtime error(2):
  out of memory", PyTorch FAQ, the loop it gives "abridged from source": a user's training loop)
Reporter's words: "Here, total_loss is accumulating history across your training loop."
Changes for this machine: the FAQ leaves model, criterion and input undefined: here a 3-layer MLP
  (512-2048-2048-1) on one random batch of 64, and criterion = mean of the output; `loss[0]`
  (a 0-d tensor can no longer be indexed) becomes `loss`, as the FAQ now writes it; the FAQ's
  10000 iterations become --steps (default 10000).
Grows: RSS (~100-330 MiB per second here, two runs: each step keeps its activations, ~2 MiB;
  nothing is printed)
Dies of: memory 4GiB after ~14-39 s here (two runs)
Prints: nothing per step
"""
import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=10000)
args = ap.parse_args()

model = torch.nn.Sequential(
    torch.nn.Linear(512, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 1),
)
input = torch.randn(64, 512)


def criterion(output):
    return output.mean()


total_loss = 0
for i in range(args.steps):
    output = model(input)
    loss = criterion(output)
    total_loss += loss
