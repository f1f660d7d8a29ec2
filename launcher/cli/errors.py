"""Turn errors into exit codes: user mistakes -> one line and 1, Ctrl-C -> 130, bugs -> 3."""

from __future__ import annotations

import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from launcher.errors import LauncherError


def run_guarded(fn: Callable[[], object]) -> int:
    try:
        result = fn()
        return int(result) if isinstance(result, int) else 0
    except LauncherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:  # a bug: keep the traceback off the terminal, in a log file
        log = Path(tempfile.gettempdir()) / "launcher-crash.log"
        log.write_text(traceback.format_exc())
        print(f"error: launcher hit an internal error; the traceback is in {log}", file=sys.stderr)
        return 3
