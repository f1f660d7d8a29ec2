"""A chunk from its index (standard library only: it runs in images).

`launcher jobs run` sets each chunk's LAUNCHER_CHUNK_* itself; a Kubernetes Indexed Job gives
only JOB_COMPLETION_INDEX, so the supervisor derives the chunk from it and the job's
LAUNCHER_CHUNK_SIZE and LAUNCHER_ITEMS (and LAUNCHER_ITEMS_FILE), before the workload starts.
Its `{out}` is an attempt folder, `ROOT/INDEX/attempt-POD`, that the supervisor commits to
`ROOT/INDEX/out` when the workload succeeded (launcher.supervise.commit); a chunk whose `out`
is committed already (an earlier pod got that far) is not run again.
"""

from __future__ import annotations

import os

from launcher.supervise import commit

ATTEMPT = "LAUNCHER_COMMIT_ATTEMPT"  # the attempt folder the supervisor commits
COMMITTED = "LAUNCHER_CHUNK_COMMITTED"  # the chunk's output was committed by an earlier pod
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
    cdir = os.path.join(env.get("LAUNCHER_CHUNK_OUT_ROOT", "/results"), f"{index:05d}")
    os.makedirs(cdir, exist_ok=True)
    env = {**env, "LAUNCHER_CHUNK_INDEX": str(index), "LAUNCHER_CHUNK_START": str(start),
           "LAUNCHER_CHUNK_END": str(end)}
    if commit.committed(cdir):
        return argv, {**env, COMMITTED: cdir}
    # the pod's own attempt (podFailurePolicy makes a replacement wait for its pod's end)
    tag = "".join(c for c in env.get("HOSTNAME", "") if c.isalnum() or c in "-_") or str(
        os.getpid())
    out = commit.new_attempt(cdir, tag, clear=False)
    env["LAUNCHER_CHUNK_OUT"] = env[ATTEMPT] = out
    values = {"index": str(index), "start": str(start), "end": str(end), "out": out, "file": ""}
    if env.get("LAUNCHER_ITEMS_FILE"):
        with open(env["LAUNCHER_ITEMS_FILE"]) as f:
            lines = [line for line in f if line.strip()][start:end]
        chunk_file = os.path.join(cdir, f"items-{tag}.txt")
        with open(chunk_file, "w") as f:
            f.writelines(lines)
        env["LAUNCHER_CHUNK_FILE"] = values["file"] = chunk_file
    return substitute(argv, values), env


def commit_in_pod(env: dict[str, str], code: int) -> tuple[int, str]:
    """After the workload: its attempt committed when it succeeded; (exit code, a sentence
    when there is something to say)."""
    attempt = env.get(ATTEMPT)
    if not attempt or code != 0:
        return code, ""
    index = env.get("LAUNCHER_CHUNK_INDEX", "?")
    try:
        final = commit.commit(attempt, {"chunk": int(index), "items": [
            int(env["LAUNCHER_CHUNK_START"]), int(env["LAUNCHER_CHUNK_END"])],
            "attempt": os.path.basename(attempt)})
    except OSError as exc:
        return 1, f"chunk {index}: its output could not be committed ({attempt}): {exc}"
    return 0, f"chunk {index}: output committed to {final}"
