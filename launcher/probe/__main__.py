"""`python3 -m launcher.probe [--capture DIR] [--root DIR]`: host facts as JSON, stdlib only.

This is what runs inside images whose Python has nothing else installed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from launcher.errors import LauncherError
from launcher.probe.capture import capture
from launcher.probe.host import probe_host


def main() -> int:
    ap = argparse.ArgumentParser(prog="python3 -m launcher.probe")
    ap.add_argument("--root", default="/", help="read host files under this root")
    ap.add_argument("--capture", metavar="DIR", help="copy the files read into DIR")
    args = ap.parse_args()
    try:
        if args.capture:
            files = capture(Path(args.capture), Path(args.root))
            print(f"captured {len(files)} files into {args.capture}")
            return 0
        json.dump(probe_host(args.root).to_json(), sys.stdout, indent=2, default=str)
        print()
    except LauncherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
