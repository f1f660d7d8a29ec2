"""A rebuild after a profile-only change against a full build, in one run.

    python benchmarks/rebuild.py [--base-image launcher-base:bookworm] [--package jax]

Builds an image whose framework layer pip-installs PACKAGE (through the host's CA bundle, as a
corporate proxy needs) with --no-cache, changes only the profile's thread caps, builds again,
and prints both times and their ratio. Target: the rebuild <= 5% of the full build.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(prof: Path, args: argparse.Namespace, *extra: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "launcher", "build", "-p", str(prof), "-f", "none",
                    "--base-image", args.base_image, "--tag", "launcher-bench/rebuild:1",
                    "--ca-cert", "/etc/ssl/certs/ca-certificates.crt", *extra],
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-image", default="launcher-base:bookworm")
    ap.add_argument("--package", default="jax")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        prof = Path(d) / "rebuild.yaml"
        prof.write_text(f"extends: base\nimage: {{pip_packages: [{args.package}]}}\n"
                        f"threads: {{intra_op: 1}}\n")
        full = build(prof, args, "--no-cache")
        prof.write_text(f"extends: base\nimage: {{pip_packages: [{args.package}]}}\n"
                        f"threads: {{intra_op: 2}}\n")
        again = build(prof, args)
    print(f"full build (--no-cache, pip install {args.package}): {full:.1f}s")
    print(f"rebuild after a profile-only change: {again:.1f}s = {100 * again / full:.1f}% of the "
          f"full build (target <= 5%)")


if __name__ == "__main__":
    main()
