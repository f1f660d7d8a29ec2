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

from launcher.supervise.__main__ import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
