"""A DataLoader (num_workers=1) whose batches are kept in a list: open file descriptors grow.

Source: https://github.com/pytorch/pytorch/issues/11201 (pytorch #11201, 2018)
Reporter's words: "The worker will then run out of file handles, if one stores the tensor in a list."
Changes for this machine: none to the loop (the reporter's Dataset of 1,000,000 {"index": i}
  items, batch_size=1, num_workers=1, appending each batch's tensor to a list); the `__len__`
  markdown slip in the report is fixed; a `__main__` guard; --steps stops it (default: the
  reporter's 1,000,000 items).
Grows: open files (~900 per second here, one per kept batch; it prints nothing) and memory
  maps with them (one mmap per kept batch: 16,735 maps at the end)
Dies of: nofile 16384 after ~22 s here (nofile 1024 would take ~1.5 s; torch: "Too many open
  files. Communication with the
  workers is no longer possible. Please increase the limit using `ulimit -n` in the shell or
  change the sharing strategy ...")
Prints: nothing per step
"""
import argparse

import torch
from torch.utils.data import Dataset


class testSet(Dataset):
    def __init__(self):
        super(testSet, self).__init__()

    def __len__(self):
        return 1000000

    def __getitem__(self, index):
        return {"index": index}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000000, help="stop after this many batches")
    args = ap.parse_args()

    test_data = testSet()
    test_data_loader = torch.utils.data.DataLoader(dataset=test_data, batch_size=1, num_workers=1)
    index = []
    for n, sample in enumerate(test_data_loader):
        index.append(sample['index'])
        if n + 1 >= args.steps:
            break
