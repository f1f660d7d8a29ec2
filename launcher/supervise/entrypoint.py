"""Entrypoint: `python3 -I -S /opt/launcher/entrypoint.py CMD...` in an image (-I keeps the
workload's PYTHONPATH and user site out of the supervisor; -S skips site: the entry points of
launcher and its plugins are copied beside the package), or this file in place, around a native
process (which launcher resolved before: the supervisor looks nothing up)."""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
# In an image the package sits beside this file; in a source tree, two levels up.
for _base in (_here, os.path.dirname(os.path.dirname(_here))):
    if os.path.isfile(os.path.join(_base, "launcher", "__init__.py")):
        sys.path.insert(0, _base)
        break

# A native run's: the folder that holds launcher's own psutil (the watch's), after the rest.
sys.path += [p for p in os.environ.get("LAUNCHER_SITE", "").split(os.pathsep) if p]

if sys.version_info < (3, 7):  # noqa: UP036 - launcher's modules need 3.7 (the watch 3.8)
    _cmd = sys.argv[2:] if sys.argv[1:2] == ["--"] else sys.argv[1:]
    if not _cmd or _cmd[0] == "--record-base-env":  # the build's step: nothing to compare
        sys.exit(0 if _cmd else 2)
    sys.stderr.write("launcher: warning: this image's python3 is {}; launcher's supervisor "
                     "needs 3.7 or newer: {} runs without its caps, unwatched\n".format(
                         ".".join(map(str, sys.version_info[:3])), _cmd[0]))
    sys.stderr.flush()
    try:
        os.execvp(_cmd[0], _cmd)
    except OSError as exc:
        sys.stderr.write("launcher: cannot run {!r}: {}\n".format(  # noqa: UP032 - 3.5
            _cmd[0], exc.strerror))
        sys.exit(127 if exc.errno == 2 else 126)

from launcher.supervise.__main__ import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
