#!/usr/bin/env python3
"""Run the cgroup v2 lab: boot user-mode Linux (two kernels at once, each pinned to a CPU of its
own and given half the layouts, where two CPUs are free; one with --cpu N), or where the host
refuses UML Debian's kernel under QEMU (KVM, else TCG; one boot with two CPUs), run every layout x
scenario of tests/lab/spec.py with `launcher run --runtime native` from --src, then the extras
(tests/lab/extras.py), and print the outcomes with the kernel's evidence.

    scripts/cgroup2-lab.py [--src DIR] [--only LAYOUT,..] [--json OUT]

Exit status: 0 when every scenario met the target rule (tests/lab/verdict.py `expected`, and
nothing left behind), 1 otherwise, 2 when the lab could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.lab import host, readme, verdict  # noqa: E402
from tests.lab.extras import NAMES as EXTRAS  # noqa: E402
from tests.lab.spec import BY_NAME, scenarios  # noqa: E402


def _load(path: Path) -> dict:  # type: ignore[type-arg]
    data = json.loads(path.read_text())
    for rec in data["records"]:
        rec["verdict"] = verdict.judge(rec)  # the rule as it is now
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=REPO,
                    help="launcher source folder, first on PYTHONPATH (default: this repo)")
    ap.add_argument("--python", help="python with launcher's dependencies "
                    "(default: this repo's .venv/bin/python, else this one)")
    ap.add_argument("--only", help=f"layouts, comma-separated: {','.join(BY_NAME)}")
    ap.add_argument("--scenarios", help="scenario keys, comma-separated: "
                    + ",".join(dict.fromkeys(s.key for s in scenarios())))
    ap.add_argument("--json", type=Path, dest="json_out", help="save the results here")
    ap.add_argument("--boot", choices=("uml", "qemu"),
                    help="how to boot the kernel (default: UML where it runs, else QEMU)")
    ap.add_argument("--mem", help="guest RAM (default 1G under UML, 1536M under QEMU)")
    ap.add_argument("--timeout", type=float, help="whole lab, seconds (default 900; 3000 "
                    "under QEMU without KVM)")
    ap.add_argument("--scenario-timeout", type=float, help="per scenario, seconds (default "
                    "60; 240 under QEMU without KVM)")
    ap.add_argument("--cpu", type=int, help="host CPU to pin UML to (default: the last one "
                    "allowed; -1: no pinning)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (init, config)")
    ap.add_argument("--verbose", action="store_true", help="also show the guest's console")
    ap.add_argument("--readme", action="store_true",
                    help=f"write the enforcement table into {readme.PAGE} (a complete run only)")
    ap.add_argument("--from-json", type=Path, dest="json_in",
                    help="judge (and with --readme write) a saved --json file; no boot")
    ap.add_argument("--no-extras", action="store_true",
                    help="skip the checks beyond the matrix (kill -9, entrypoint, doctor "
                         "--clean, report 002)")
    ap.add_argument("--extras", help="only these extras, comma-separated: "
                    + ",".join(EXTRAS))
    args = ap.parse_args(argv)
    wrong = [x for x in (args.extras or "").split(",") if x and x not in EXTRAS]
    if wrong:
        ap.error(f"unknown extra(s): {', '.join(wrong)}; known: {', '.join(EXTRAS)}")
    try:
        data = _load(args.json_in) if args.json_in else host.run_lab(
            args.src, python=args.python or host.default_python(),
            layouts=args.only.split(",") if args.only else None,
            scenarios=args.scenarios.split(",") if args.scenarios else None,
            mem=args.mem, timeout=args.timeout, scenario_timeout=args.scenario_timeout,
            cpu=args.cpu, way=args.boot,
            progress=lambda line: print(line, flush=True), keep=args.keep,
            verbose=args.verbose,
            extras=args.extras.split(",") if args.extras else not args.no_extras)
    except (host.LabUnavailable, RuntimeError, ValueError) as exc:
        print(f"cgroup2-lab: {exc}", file=sys.stderr)
        return 2
    if args.json_out:
        args.json_out.write_text(json.dumps(data, indent=1))
    if args.readme:
        if not readme.complete(data):
            print("cgroup2-lab: --readme needs a run of every layout, scenario and extra",
                  file=sys.stderr)
            return 2
        readme.write_readme(REPO / readme.PAGE, data)
        print(f"wrote the enforcement table into {REPO / readme.PAGE}")
    print()
    print(host.table(data))
    print()
    print(host.summary(data))
    if "way" in data["meta"]:
        print(host.describe(data["meta"]))
    bad = [r for r in data["records"]
           if (r.get("verdict") or {}).get("outcome") != verdict.expected(r)
           or (r.get("verdict") or {}).get("leftovers")]
    bad += [x for x in data.get("extras", []) if x["problems"]]
    short = len(data["records"]) < data["meta"].get("planned", 0)
    return 1 if bad or short or data["meta"].get("timed_out") else 0


if __name__ == "__main__":
    sys.exit(main())
