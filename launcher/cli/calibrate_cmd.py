"""`launcher calibrate`: the flags as a request to the calibrate use case
(launcher/usecases/calibrate.py), its measurements as a table or JSON."""

from __future__ import annotations

import dataclasses

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json, table
from launcher.usecases.calibrate import CalibrateRequest


def calibrate(req: CalibrateRequest, *, as_json: bool) -> int:
    from launcher.usecases.calibrate import calibrate as measure

    got = measure(dataclasses.replace(req, show_progress=not as_json))
    if as_json:
        print_json({"file": str(got.file), "entries": got.entries})
        return 0
    rows = []
    for e in got.entries:
        gpu = f"{e['gpus']} {e.get('vendor', '')}".strip() if e.get("gpus") else "-"
        rows.append((e["framework"], str(e["version"]), str(e["cpus"]), gpu, str(e["peak"]),
                     str(e["model"]), f"{e['peak'] - e['model']:+d}", e["date"]))
    print(table([("framework", "version", "CPUs", "GPU", "peak", "model", "offset", "date"),
                 *rows]))
    print(f"saved in {got.file}: `launcher plan` and `run` use it for these versions and CPU "
          f"counts (source: calibrated on this host); model: the built-in model's figure for "
          f"the probe, whose few steps never grow some pools a real program does (those stay "
          f"in every estimate)")
    return 0


COMMAND = command("calibrate", CalibrateRequest, calibrate, own=(JSON,), help="""Measure each
framework's peak thread count on this host (start, import, compiled training steps) at several
CPU counts, with no GPU visible and with one GPU visible where the host has one, for `plan` and
`run` to budget with.""")
