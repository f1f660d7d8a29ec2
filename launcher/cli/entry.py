"""The `launcher` command's entry point: `launcher run ...` goes to its command alone
(cli/run_command.py: no group, no other command built); every other command line to the
group (cli/main.py)."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        import gc  # a start that allocates much and frees little: the run turns it back on
        gc.disable()  # once its start-up objects are frozen (runtime/session.py)
        from launcher.cli.run_command import run

        try:
            run.main(args=sys.argv[2:], prog_name="launcher run")
        except SystemExit as done:
            exit_now(done.code)
    from launcher.cli.main import main as group_main

    group_main()


def exit_now(code: object) -> None:
    """The end of `launcher run`: what the interpreter's own exit does that matters (its
    threads' shutdown, atexit, the output flushed), then out without tearing down the ~300
    modules and objects the run built: ~5-10 ms of every run, memory the kernel frees at once.
    Every file the run wrote is closed by then (the summary, the telemetry, the growth
    record). A second Ctrl-C while it waits (a removal after a stop) leaves at once."""
    import atexit
    import contextlib
    import os
    import threading

    if code is not None and not isinstance(code, int):  # sys.exit("message")
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(code, file=sys.stderr)
        code = 1
    with contextlib.suppress(KeyboardInterrupt):
        threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter's exit does
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):  # None where the fd was closed from the start
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a closed pipe
            stream.flush()  # type: ignore[union-attr]
    if isinstance(code, int) and code < 0:  # the workload died of signal -code: so do we
        from launcher.usecases.run import die_of

        die_of(-code)
        code = 128 - code
    os._exit(code or 0)


if __name__ == "__main__":
    main()
