"""`launcher workloads`: the catalog (launcher/usecases/workloads.py), in words or JSON."""

from __future__ import annotations

from launcher.cli.declare import JSON, command
from launcher.cli.output import print_json, table


def list_workloads(*, as_json: bool) -> int:
    from launcher.usecases.workloads import catalog

    items = catalog()
    if as_json:
        print_json([w.to_json() for w in items.values()])
        return 0
    for w in items.values():
        print(f"{w.name}  [{w.framework}]  {w.description}  ({w.source})")
        flags = w.flags()
        if flags:
            print(table([(flag, text) for flag, text in flags.items()], indent="    "))
    return 0


COMMAND = command("workloads", None, list_workloads, own=(JSON,), help="List the workloads "
                  "`launcher run` knows: built-in and user YAML ones.")
