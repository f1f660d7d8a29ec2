"""`python -m launcher.telemetry RUN_DIR`: draw RUN_DIR/telemetry.png (run in the background
at the end of `launcher run`)."""

import sys
from pathlib import Path

from launcher.telemetry.plot import draw

sys.exit(0 if draw(Path(sys.argv[1])) else 1)
