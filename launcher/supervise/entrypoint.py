"""Image entrypoint: `python3 -I -S /opt/launcher/entrypoint.py CMD...` (-I keeps the
workload's PYTHONPATH and user site out of the supervisor; -S skips site, which it never needs)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from launcher.supervise.__main__ import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
