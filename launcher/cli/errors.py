"""Turn errors into exit codes: user mistakes -> one line and 1, Ctrl-C -> 130, bugs -> 3."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from launcher.errors import LauncherError


def run_guarded(fn: Callable[[], object]) -> int:
    try:
        result = fn()
        return int(result) if isinstance(result, int) else 0
    except LauncherError as exc:
        for line in str(exc).splitlines() or [""]:  # several mistakes: one line each
            print(f"error: {line}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:  # a bug: keep the traceback off the terminal, in a log file
        import os
        import tempfile
        import traceback

        log = Path(tempfile.gettempdir()) / f"launcher-crash-{os.getuid()}.log"
        try:  # a shared folder: never through a link someone else left there
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(traceback.format_exc())
            where = f"the traceback is in {log}"
        except OSError:
            where = "the traceback could not be saved"
        print(f"error: launcher hit an internal error; {where}", file=sys.stderr)
        return 3
