"""A made-up workload on the made-up framework: it starts the framework's pool and prints how
many threads it has and what the caps set. One module and one entry-point line."""

from __future__ import annotations

import argparse
import os
import threading

from launcher.checks import CheckInput
from launcher.keys import Key
from launcher.workloads.workload import Workload

LONGEST = 20  # the longest greeting it prints whole


def _greeting_fits(c: CheckInput) -> list[tuple[str, str]]:
    """Its own verdict check, on its own key."""
    said = c.profile.get("hello.greeting")
    if said is not None and len(said) > LONGEST:
        return [("warn", f"hello.greeting is {len(said)} characters; hello-onnx prints the "
                         f"first {LONGEST}.")]
    return []


WORKLOAD = Workload(
    name="hello-onnx", description="the fake framework's pool, counted", framework="onnx",
    module=__name__,
    # its own profile key, the variable it reads, and which sets which: declared here alone
    profile_keys={"hello": {"greeting": Key("str", "hello-onnx: the word it says first")}},
    variables={"HELLO_GREETING": "hello-onnx: the word it says first"},
    from_keys={"hello.greeting": "HELLO_GREETING"},
    checks=(_greeting_fits,))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hello-onnx")
    ap.add_argument("--say", default=os.environ.get("HELLO_GREETING", "hello")[:LONGEST],
                    help="a word to print first (default: the profile's hello.greeting)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from launcher_fakes.framework import first_op

    first_op()
    print(f"{args.say} onnx: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} "
          f"threads={threading.active_count()} "
          f"ONNX_INTRA_OP_THREADS={os.environ.get('ONNX_INTRA_OP_THREADS')} "
          f"ONNX_ARENA={os.environ.get('ONNX_ARENA')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
