"""A chunk from its index (standard library only: it runs in images).

`launcher jobs run` sets each chunk's variables (launcher.contract.chunk_env) itself; a
Kubernetes Indexed Job gives only JOB_COMPLETION_INDEX, so the supervisor derives the chunk from
it and the job's CHUNK_SIZE and ITEMS (and ITEMS_FILE), before the workload starts.
Its `{out}` is an attempt folder, `ROOT/INDEX/attempt-POD`, that the supervisor commits to
`ROOT/INDEX/out` when the workload succeeded (launcher.supervise.commit); a chunk whose `out`
is committed already (an earlier pod got that far) is not run again.
"""

from __future__ import annotations

import os

from launcher import contract as c


def from_index(argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command and environment of chunk JOB_COMPLETION_INDEX (unchanged when not in an
    Indexed Job)."""
    if "JOB_COMPLETION_INDEX" not in env or c.CHUNK_SIZE not in env:
        return argv, env
    from launcher.supervise import commit  # shutil's imports: only for a pod's chunk

    index = int(env["JOB_COMPLETION_INDEX"])
    size, items = int(env[c.CHUNK_SIZE]), int(env[c.ITEMS])
    start, end = index * size, min((index + 1) * size, items)
    cdir = os.path.join(env.get(c.CHUNK_OUT_ROOT, "/results"), f"{index:05d}")
    os.makedirs(cdir, exist_ok=True)
    if commit.committed(cdir):
        return argv, {**env, c.CHUNK_INDEX: str(index), c.CHUNK_COMMITTED: cdir}
    # the pod's own attempt (podFailurePolicy makes a replacement wait for its pod's end)
    tag = "".join(ch for ch in env.get("HOSTNAME", "") if ch.isalnum() or ch in "-_") or str(
        os.getpid())
    out = commit.new_attempt(cdir, tag, clear=False)
    chunk_file = None
    if env.get(c.ITEMS_FILE):
        with open(env[c.ITEMS_FILE]) as f:
            lines = [line for line in f if line.strip()][start:end]
        chunk_file = os.path.join(cdir, f"items-{tag}.txt")
        with open(chunk_file, "w") as f:
            f.writelines(lines)
    chunk = c.chunk_env(job=None, index=index, start=start, end=end, out=out, file=chunk_file)
    # the pod's run record (the watch's telemetry and summary) beside its attempt
    record = os.path.join(cdir, f"record-{tag}")
    return c.substitute(argv, chunk), {**env, **chunk, c.COMMIT_ATTEMPT: out,
                                       c.RECORD_DIR: record}


def commit_in_pod(env: dict[str, str], code: int) -> tuple[int, str]:
    """After the workload: its attempt committed when it succeeded; (exit code, a sentence
    when there is something to say)."""
    attempt = env.get(c.COMMIT_ATTEMPT)
    if not attempt or code != 0:
        return code, ""
    from launcher.supervise import commit

    index = env.get(c.CHUNK_INDEX, "?")
    try:
        final = commit.commit(attempt, {"chunk": int(index), "items": [
            int(env[c.CHUNK_START]), int(env[c.CHUNK_END])],
            "attempt": os.path.basename(attempt)})
    except OSError as exc:
        return 1, f"chunk {index}: its output could not be committed ({attempt}): {exc}"
    return 0, f"chunk {index}: output committed to {final}"
