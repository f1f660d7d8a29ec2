"""One way for a test to wait: poll a condition until it holds, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.05,
               what: str = "the condition") -> T:
    """Call `predicate` every `interval` seconds until it returns something true, and return
    that; after `timeout` seconds, fail with `what` and the last value it returned. A
    predicate may raise (an AssertionError: the process it waits on is gone) to stop early."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g}s for {what}; last: {value!r}")
        time.sleep(interval)
