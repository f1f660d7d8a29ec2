"""One way for a test to wait: poll a condition until it holds, never a fixed sleep."""

from __future__ import annotations

import subprocess
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


def while_running(proc: subprocess.Popen, predicate: Callable[[], T]) -> Callable[[], T]:  # type: ignore[type-arg]
    """`predicate`, failing at once with the process's stderr when `proc` ends first (the
    thing waited for will never come)."""
    def check() -> T:
        value = predicate()
        if not value and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the process ended ({proc.returncode}) first: {err}")
        return value
    return check
