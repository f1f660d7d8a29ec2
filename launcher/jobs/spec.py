"""Job specs: a command run once per chunk of items, validated like profiles
(`error: FILE:LINE: KEY: what is wrong (got VALUE)`, every mistake on its own line).

    name: score-survivors
    command: [python3, worker.py, --start, "{start}", --end, "{end}", --out, "{out}"]
    items: 98172                # a count, or {file: survivors.txt} (one item per line)
    chunk_size: 1000            # or auto (the profile's jobs.chunk_size)
    min_chunk_size: 125         # an OOM-killed chunk is split in half down to this size
    framework: torch
    profile: rig-6600
    retries: 1                  # other failures: tried again this many times
    timeout: 10m                # per chunk (seconds, or 30s, 10m, 2h)
    output: runs/score          # the job's folder (ledger, chunks); relative to this file
                                # (default: runs/jobs/NAME beside this file)
    env: {SCORER: fast}         # explicit variables for every chunk
    nodes: 3                    # machines of the profile's kind that run it (a Kubernetes
                                # render's parallelism: nodes x each one's cap)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from launcher.errors import ProfileError
from launcher.frameworks import names as framework_names
from launcher.names import NAME, NAME_RULE
from launcher.profiles.yamlsrc import Located, load_yaml

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYS = ("name", "command", "items", "chunk_size", "min_chunk_size", "framework", "profile",
        "retries", "timeout", "output", "env", "image", "nodes")


class JobSpecError(ProfileError):
    """A job spec is missing, unreadable or invalid."""


@dataclass
class JobSpec:
    path: Path
    name: str
    command: list[str]
    items: int
    items_file: Path | None = None
    chunk_size: int | None = None  # None: auto
    min_chunk_size: int | None = None
    framework: str | None = None
    profile: str = "auto"
    retries: int = 1
    timeout: float | None = None  # seconds per chunk
    output: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    nodes: int = 1  # machines of the profile's kind that run the job (a cluster's render)

    def identity(self) -> str:
        """What makes two runs the same job (a rerun resumes it; another spec may not)."""
        items = (hashlib.sha256(self.items_file.read_bytes()).hexdigest()[:16]
                 if self.items_file else str(self.items))
        return json.dumps({"command": self.command, "items": items}, sort_keys=True)

    def folder(self) -> Path:
        """The job's folder (its ledger), absolute and the spec's, wherever launcher is run
        from: `output` (relative to the spec), else $LAUNCHER_RUNS_DIR/jobs/NAME, else
        runs/jobs/NAME beside the spec."""
        if self.output is not None:
            return self.output.resolve()
        env = os.environ.get("LAUNCHER_RUNS_DIR")
        runs = Path(env) if env else self.path.resolve().parent / "runs"
        return (runs / "jobs" / self.name).resolve()

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}


def load_job(path: Path) -> JobSpec:
    if not path.is_file():
        raise JobSpecError(f"{path}: no such job spec")
    try:
        doc = load_yaml(path, "job spec")
    except ProfileError as exc:
        raise JobSpecError(str(exc)) from None
    if not isinstance(doc.data, dict):
        raise JobSpecError(f"{path}:1: expected a mapping of job keys ({', '.join(KEYS)})")
    errors: list[str] = []
    data = doc.data

    def where(key: str) -> str:
        return f"{path}:{doc.line((key,))}: {key}"

    def fail(key: str, why: str, value: Any = None, show: bool = True) -> None:
        errors.append(f"{where(key)}: {why}" + (f" (got {value!r})" if show else ""))

    for key in data:
        if key not in KEYS:
            import difflib

            hint = difflib.get_close_matches(str(key), KEYS, n=1)
            fail(str(key), "unknown key" + (f"; did you mean {hint[0]!r}?" if hint else
                                            f"; known keys: {', '.join(KEYS)}"), show=False)
    command = _command(data, fail)
    items, items_file = _items(data, path, doc, fail)
    chunk = data.get("chunk_size", "auto")
    if chunk != "auto" and not _positive_int(chunk):
        fail("chunk_size", "must be a whole number of items or `auto`", chunk)
    min_chunk = data.get("min_chunk_size")
    if min_chunk is not None and not _positive_int(min_chunk):
        fail("min_chunk_size", "must be a whole number of items", min_chunk)
    framework = data.get("framework")
    if framework is not None and framework not in framework_names():
        fail("framework", f"must be one of {', '.join(framework_names())}", framework)
    nodes = data.get("nodes", 1)
    if not _positive_int(nodes):
        fail("nodes", "must be a whole number of machines, 1 or more", nodes)
    retries = data.get("retries", 1)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        fail("retries", "must be a whole number, 0 or more", retries)
    timeout = _duration(data.get("timeout"), fail)
    env = _env(data.get("env", {}), path, doc, errors)
    for key in ("name", "profile", "output", "image"):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            fail(key, "must be a non-empty string", data[key])
    name = data.get("name", path.stem)
    if isinstance(name, str) and name.strip() and not NAME.match(name):
        fail("name", f"must be {NAME_RULE} (it names the job's folder and containers)", name)
    profile = str(data.get("profile", "auto"))
    if "/" in profile or profile.endswith((".yaml", ".yml")):  # a path: the spec's folder's
        found = (path.parent / profile).resolve()
        if not found.is_file():
            fail("profile", f"no such profile file {str(found)!r}", data.get("profile"))
        profile = str(found)
    if errors:
        raise JobSpecError("\n".join(errors))
    output = data.get("output")
    return JobSpec(
        path=path, name=str(data.get("name", path.stem)), command=command, items=items,
        items_file=items_file, chunk_size=None if chunk == "auto" else int(chunk),
        min_chunk_size=min_chunk, framework=framework, profile=profile,
        retries=int(retries), timeout=timeout,
        output=(path.parent / output).resolve() if output else None, env=env,
        image=data.get("image"), nodes=int(nodes))


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _command(data: dict[str, Any], fail: Any) -> list[str]:
    command = data.get("command")
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as exc:
            fail("command", f"cannot split it like a shell would: {exc}", data["command"])
            return []
    if command is None:
        fail("command", "is required: the program each chunk runs, as a list", show=False)
        return []
    if not isinstance(command, list) or not command or not all(
            isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in command):
        fail("command", "must be a list of strings (never run through a shell)", command)
        return []
    return [str(c) for c in command]


def _items(data: dict[str, Any], path: Path, doc: Located,
           fail: Any) -> tuple[int, Path | None]:
    items = data.get("items")
    if items is None:
        fail("items", "is required: a count, or {file: PATH} with one item per line",
             show=False)
        return 0, None
    if isinstance(items, dict):
        if set(items) != {"file"} or not isinstance(items["file"], str):
            fail("items", "expected {file: PATH}", items)
            return 0, None
        f = (path.parent / items["file"]).resolve()
        if not f.is_file():
            fail("items", f"no such file {str(f)!r}", show=False)
            return 0, None
        with f.open("rb") as fh:
            count = sum(1 for line in fh if line.strip())
        if count == 0:
            fail("items", f"{f} holds no items", show=False)
        return count, f
    if not _positive_int(items):
        fail("items", "must be a whole number of items, or {file: PATH}", items)
        return 0, None
    return int(items), None


def _duration(value: Any, fail: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = _DURATION.match(str(value)) if isinstance(value, str) else None
    if not m or float(m.group(1)) <= 0:
        fail("timeout", "must be seconds, or a duration such as 30s, 10m, 2h", value)
        return None
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def _env(value: Any, path: Path, doc: Located, errors: list[str]) -> dict[str, str]:
    if not isinstance(value, dict):
        errors.append(f"{path}:{doc.line(('env',))}: env: must be a mapping of NAME: value "
                      f"(got {value!r})")
        return {}
    out = {}
    for name, v in value.items():
        line = doc.line(("env", str(name)))
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            errors.append(f"{path}:{line}: env.{name}: not a valid variable name")
        elif v is None or isinstance(v, (dict, list)):
            errors.append(f"{path}:{line}: env.{name}: must be a string or number (got {v!r})")
        else:
            out[name] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out
