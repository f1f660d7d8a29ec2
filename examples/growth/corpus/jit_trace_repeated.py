"""torch.jit.trace called again and again on one model: each trace keeps its graph in torch's global compilation unit, and memory rises in lumps (steps of 20-60 MB with flat stretches and dips between).

Source: https://github.com/pytorch/pytorch/issues/35600 (pytorch #35600, 2020; from the forum post
  https://discuss.pytorch.org/t/possible-memory-leak-in-torch-jit-trace/74455)
Reporter's words: "Tracing a model multiple times seems to increase the memory usage."
Changes for this machine: torchvision is not installed, so its resnet18 is written out here
  (the same layers: a 7x7 stem, four stages of two basic blocks, 64-512 channels); the
  reporter's input size, loop and print line; `--steps`/argv[1] for the loop's length.
Grows: memory (RSS), ~4-5 MiB a trace on average, in lumps
Dies of: memory 1GiB after ~60-90 s (OOM kill)
Prints: "Iter: N = pfullmem(rss=..., ...)" per trace
"""
import os
import sys

import psutil
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False); self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False); self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x))); y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))

def resnet18():
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]; cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)

with torch.no_grad():
  model = resnet18()
  model.eval
  sample_input = torch.randn(size=[2, 3, 480, 640], requires_grad=False)
  process = psutil.Process(os.getpid())
  for i in range(0, int(sys.argv[1]) if len(sys.argv) > 1 else 1000):
    tr_model = torch.jit.trace(model, sample_input, check_trace=False)
    print("Iter: {} = {}".format(i, process.memory_full_info()))
