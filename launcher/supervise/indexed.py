"""A chunk from its index (standard library only: it runs in images).

`launcher jobs run` sets each chunk's LAUNCHER_CHUNK_* itself; a Kubernetes Indexed Job gives
only JOB_COMPLETION_INDEX, so the supervisor derives the chunk from it and the job's
LAUNCHER_CHUNK_SIZE and LAUNCHER_ITEMS (and LAUNCHER_ITEMS_FILE), before the workload starts.
"""

from __future__ import annotations

import os

PLACEHOLDERS = ("{index}", "{start}", "{end}", "{out}", "{file}")


def substitute(command: list[str], values: dict[str, str]) -> list[str]:
    """`{start}`, `{end}`, `{index}`, `{out}`, `{file}` replaced where they are whole
    arguments (never inside one, never through a shell)."""
    return [values.get(arg[1:-1], arg) if arg in PLACEHOLDERS else arg for arg in command]


def from_index(argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command and environment of chunk JOB_COMPLETION_INDEX (unchanged when not in an
    Indexed Job)."""
    if "JOB_COMPLETION_INDEX" not in env or "LAUNCHER_CHUNK_SIZE" not in env:
        return argv, env
    index = int(env["JOB_COMPLETION_INDEX"])
    size, items = int(env["LAUNCHER_CHUNK_SIZE"]), int(env["LAUNCHER_ITEMS"])
    start, end = index * size, min((index + 1) * size, items)
    out = os.path.join(env.get("LAUNCHER_CHUNK_OUT_ROOT", "/results"), f"{index:05d}")
    os.makedirs(out, exist_ok=True)
    env = {**env, "LAUNCHER_CHUNK_INDEX": str(index), "LAUNCHER_CHUNK_START": str(start),
           "LAUNCHER_CHUNK_END": str(end), "LAUNCHER_CHUNK_OUT": out}
    values = {"index": str(index), "start": str(start), "end": str(end), "out": out, "file": ""}
    if env.get("LAUNCHER_ITEMS_FILE"):
        with open(env["LAUNCHER_ITEMS_FILE"]) as f:
            lines = [line for line in f if line.strip()][start:end]
        chunk_file = os.path.join(out, "items.txt")
        with open(chunk_file, "w") as f:
            f.writelines(lines)
        env["LAUNCHER_CHUNK_FILE"] = values["file"] = chunk_file
    return substitute(argv, values), env
