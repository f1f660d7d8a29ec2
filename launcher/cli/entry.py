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

        run.main(args=sys.argv[2:], prog_name="launcher run")  # exits
    from launcher.cli.main import main as group_main

    group_main()


if __name__ == "__main__":
    main()
