"""DataLoader workers reading a Dataset that holds a big Python list: their memory grows (copy-on-read).

Source: https://github.com/pytorch/pytorch/issues/13246 (pytorch #13246, 2018: "CPU memory
  gradually leaks when num_workers > 0 in the DataLoader"); the Dataset class is the one of
  goldan's reproduction in https://github.com/pytorch/pytorch/issues/20433 (comment, 2020)
Reporter's words: "Dataloader's memory usage keeps increasing during one single epoch."
Changes for this machine: the Dataset class is goldan's (a list of str(i).zfill(1024) metadata
  read by index) with 700,000 items instead of 8,000,000 (~0.8 GiB, not ~9 GiB); goldan drives
  it with his own multiprocessing queues and 16 workers, here a torch DataLoader with
  num_workers=2, batch_size=2 reads it (the loop of #13246), --epochs (default 10).
Grows: memory of the worker processes (their RSS counts the parent's pages from the start;
  their private memory, USS, grows ~30 MiB per second at first, slowing as fewer pages are
  left to copy: PSS of the tree 1017 -> 1843 -> 2207 MiB at 5/27/47 s; an epoch takes ~58 s and
  the workers, and their copies, go at its end)
Dies of: memory 2GiB after ~37 s here (the tree's summed PSS reached 2048 MiB at 37 s)
Prints: nothing per step
"""
import argparse

from torch.utils.data import DataLoader


class MyDataSet:
    def __init__(self):
        self.metadata = [str(i).zfill(1024) for i in range(len(self))]

    def __len__(self):
        return 700000

    def get_metadata(self, index):
        return self.metadata[index]

    def __getitem__(self, index):
        return self.get_metadata(index)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()
    loader = DataLoader(MyDataSet(), batch_size=2, num_workers=2, shuffle=True)
    for epoch in range(args.epochs):
        for batch in loader:
            pass
