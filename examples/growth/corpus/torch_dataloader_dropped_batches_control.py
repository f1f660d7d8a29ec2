"""CONTROL: the same DataLoader (num_workers=1) as pytorch #11201, but the loop keeps nothing.

Source: https://github.com/pytorch/pytorch/issues/11201 (pytorch #11201, 2018)
Reporter's words: "The worker will then run out of file handles, if one stores the tensor in a
  list." (this is the loop that does not store it)
Changes for this machine: the reporter's Dataset and DataLoader unchanged; the loop body reads
  the batch (`sample['index']`) instead of appending it to a list; --seconds (default 30) ends it
  (the reporter's dataset has 1,000,000 items).
Grows: nothing (open files flat at 15; RSS flat at 396 MiB)
Dies of: nothing under nofile 1024; exits after --seconds
Prints: nothing per step
"""
import argparse
import time

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
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()

    test_data = testSet()
    test_data_loader = torch.utils.data.DataLoader(dataset=test_data, batch_size=1, num_workers=1)
    t0 = time.monotonic()
    last = None
    for sample in test_data_loader:
        last = sample['index']
        if time.monotonic() - t0 > args.seconds:
            break
