"""`python3 -m launcher.supervise [--] CMD...`: the entrypoint of every launcher container, and
the supervisor of every native run and job chunk.

Resolves the caps recipe against the container's own cgroup (or takes launcher's), sets every
managed variable (an explicit -e wins; a stale value from the base image does not), lowers soft
ulimits, runs the pre-flight, then runs CMD as its child (supervise/run.py: its stages): relays
signals, hands it the terminal, reaps zombies (it is PID 1), and when CMD ends says why in one
sentence and exits with CMD's status, or ends by the signal CMD died of.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from launcher import contract as c
from launcher.proctree import is_init


def main(argv: list[str]) -> int:
    from launcher.supervise.run import Run, Voice

    if argv[:1] == ["--record-base-env"]:
        from launcher.supervise.apply import dump_env

        dump_env(Path(argv[1]) if len(argv) > 1 else Path(c.BASE_ENV_FILE))
        return 0
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        Voice()("usage: python3 -m launcher.supervise [--] CMD [ARGS...]")
        return 2
    run = Run(argv, dict(os.environ))
    code = run()
    if run.died_of and not is_init():  # PID 1 cannot: the kernel protects it
        from launcher.contract import die_of

        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        die_of(run.died_of)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
