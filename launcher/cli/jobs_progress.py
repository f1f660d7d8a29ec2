"""Progress of a job: a tqdm bar in a terminal (chunks done / failed / running, items/s,
ETA), plain lines otherwise (one per chunk that ends). The counts are this run's; a resumed
run's lines show the job's items beside them, labelled."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO


class Progress:
    def __init__(self, total_items: int, done_items: int, stream: TextIO = sys.stderr) -> None:
        self.total, self.done_items = total_items, done_items
        self.stream = stream
        self.started = time.monotonic()
        self.start_items = done_items
        self.counts = {"done": 0, "failed": 0, "running": 0, "split": 0, "retried": 0}
        self.lock = threading.Lock()
        self.bar: Any = None
        if stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_items, initial=done_items, unit="item", file=stream,
                            dynamic_ncols=True, smoothing=0.1)

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return (self.done_items - self.start_items) / elapsed if elapsed > 0 else 0.0

    def _postfix(self) -> str:
        c = self.counts
        return (f"{c['done']} done, {c['failed']} failed, {c['running']} running"
                + (f", {c['split']} split" if c["split"] else "")
                + (f", {c['retried']} retried" if c["retried"] else ""))

    def running(self, delta: int) -> None:
        with self.lock:
            self.counts["running"] += delta
            if self.bar is not None:
                self.bar.set_postfix_str(self._postfix(), refresh=True)

    def ended(self, what: str, line: str, items: int = 0) -> None:
        """A chunk ended: `what` is done, failed, split or retried."""
        with self.lock:
            self.counts[what] += 1
            self.done_items += items
            if self.bar is not None:
                self.bar.update(items)
                self.bar.set_postfix_str(self._postfix(), refresh=True)
                if what != "done":
                    self.bar.write(line)
                return
            print(f"{line} [{self._where()}]", file=self.stream, flush=True)

    def _where(self) -> str:
        rate = self.rate()
        left = self.total - self.done_items
        speed = rate_text(rate) + (f", ETA {left / rate:.0f}s" if rate > 0 and left else "")
        if self.start_items == 0:  # a first run: the job's figures are this run's
            return f"{self.done_items}/{self.total} items; {self._postfix()}; {speed}"
        return (f"this run: {self.done_items - self.start_items} items, {self._postfix()}, "
                f"{speed}; job: {self.done_items}/{self.total} items")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def rate_text(rate: float) -> str:
    """`12 items/s`, `1 item/s`, or `<1 item/s` (never `0 items/s` while items are done)."""
    if rate < 0.5:
        return "<1 item/s"
    return f"{rate:.0f} item{'' if round(rate) == 1 else 's'}/s"
