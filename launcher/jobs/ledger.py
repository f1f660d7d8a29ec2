"""The job's ledger: SQLite in the job's folder (WAL, one transaction per change), the one
record of which chunk is pending, running, done, failed or split, by whom and how it ended.

A rerun of the same job after Ctrl-C, kill -9 or a reboot reads it back: chunks left `running`
by a launcher that is gone are finished if their supervisor recorded a clean exit (exit.json)
and their output is committed (chunks/N/out, launcher.supervise.commit), else pending again; a
`done` chunk never runs again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    start_item INTEGER NOT NULL,
    end_item INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',  -- pending | running | done | failed | split
    attempts INTEGER NOT NULL DEFAULT 0,
    parent INTEGER,
    slot TEXT,
    gpu INTEGER,
    runner TEXT,                            -- HOST:PID of the launcher running it
    started REAL,
    ended REAL,
    exit_status INTEGER,
    diagnosis TEXT,
    peak_bytes INTEGER,
    log_tail TEXT
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, chunk INTEGER, kind TEXT NOT NULL,
    text TEXT NOT NULL
);
"""
STATES = ("pending", "running", "done", "failed", "split")


@dataclass(frozen=True)
class Chunk:
    id: int
    start: int
    end: int
    state: str = "pending"
    attempts: int = 0
    parent: int | None = None
    slot: str | None = None
    gpu: int | None = None
    runner: str | None = None
    started: float | None = None
    ended: float | None = None
    exit_status: int | None = None
    diagnosis: str | None = None
    peak_bytes: int | None = None
    log_tail: str | None = None

    @property
    def size(self) -> int:
        return self.end - self.start


class JobMismatch(Exception):
    """The folder holds another job."""


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None,
                                  check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def _tx(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self.db)
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
            return out

    def meta(self) -> dict[str, str]:
        with self.lock:
            return {r["key"]: r["value"] for r in self.db.execute("SELECT * FROM meta")}

    def set_meta(self, key: str, value: str) -> None:
        self._tx(lambda db: db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                       (key, value)))

    def init(self, identity: str, info: dict[str, Any],
             chunks: list[tuple[int, int]]) -> bool:
        """Make a new job or check that this folder holds the same one; True when new."""

        def go(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT value FROM meta WHERE key='identity'").fetchone()
            if row is not None:
                if row["value"] != identity:
                    raise JobMismatch(row["value"])
                return False
            db.execute("INSERT INTO meta VALUES ('identity', ?)", (identity,))
            db.execute("INSERT INTO meta VALUES ('info', ?)", (json.dumps(info),))
            db.execute("INSERT INTO meta VALUES ('created', ?)", (str(time.time()),))
            db.executemany("INSERT INTO chunks (id, start_item, end_item) VALUES (?, ?, ?)",
                           [(i, s, e) for i, (s, e) in enumerate(chunks)])
            return True

        return bool(self._tx(go))

    def chunks(self, state: str | None = None) -> list[Chunk]:
        with self.lock:
            rows = self.db.execute(
                "SELECT * FROM chunks" + (" WHERE state=?" if state else "") + " ORDER BY id",
                (state,) if state else ()).fetchall()
        return [_chunk(r) for r in rows]

    def counts(self) -> dict[str, int]:
        with self.lock:
            rows = self.db.execute("SELECT state, COUNT(*) n FROM chunks GROUP BY state")
            found = {r["state"]: r["n"] for r in rows}
        return {s: found.get(s, 0) for s in STATES}

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(r) for r in self.db.execute("SELECT * FROM events ORDER BY id")]

    def event(self, chunk: int | None, kind: str, text: str) -> None:
        self._tx(lambda db: db.execute(
            "INSERT INTO events (ts, chunk, kind, text) VALUES (?, ?, ?, ?)",
            (time.time(), chunk, kind, text)))

    def claim(self, slot: str, gpu: int | None, runner: str) -> Chunk | None:
        """The next pending chunk, marked running on `slot` (None when there is none)."""

        def go(db: sqlite3.Connection) -> Chunk | None:
            row = db.execute("SELECT id FROM chunks WHERE state='pending' ORDER BY id "
                             "LIMIT 1").fetchone()
            if row is None:
                return None
            db.execute("UPDATE chunks SET state='running', attempts=attempts+1, slot=?, gpu=?, "
                       "runner=?, started=?, ended=NULL, exit_status=NULL, diagnosis=NULL "
                       "WHERE id=?", (slot, gpu, runner, time.time(), row["id"]))
            return _chunk(db.execute("SELECT * FROM chunks WHERE id=?",
                                     (row["id"],)).fetchone())

        return self._tx(go)  # type: ignore[no-any-return]

    def finish(self, chunk_id: int, state: str, *, exit_status: int | None,
               diagnosis: str | None, peak: int | None, log_tail: str | None = None) -> None:
        assert state in ("done", "failed", "pending")
        self._tx(lambda db: db.execute(
            "UPDATE chunks SET state=?, ended=?, exit_status=?, diagnosis=?, peak_bytes=?, "
            "log_tail=? WHERE id=?",
            (state, time.time(), exit_status, diagnosis, peak, log_tail, chunk_id)))

    def interrupted(self, chunk_id: int, exit_status: int | None, peak: int | None) -> None:
        """Pending again, the attempt given back: the chunk did not fail, it was stopped."""
        self._tx(lambda db: db.execute(
            "UPDATE chunks SET state='pending', attempts=MAX(attempts-1, 0), ended=?, "
            "exit_status=?, diagnosis='interrupted', peak_bytes=? WHERE id=?",
            (time.time(), exit_status, peak, chunk_id)))

    def split(self, chunk: Chunk, diagnosis: str, peak: int | None) -> list[Chunk]:
        """Mark `chunk` split and add its two halves as new pending chunks."""
        mid = chunk.start + chunk.size // 2

        def go(db: sqlite3.Connection) -> list[Chunk]:
            db.execute("UPDATE chunks SET state='split', ended=?, diagnosis=?, peak_bytes=? "
                       "WHERE id=?", (time.time(), diagnosis, peak, chunk.id))
            top = db.execute("SELECT MAX(id) m FROM chunks").fetchone()["m"]
            halves = [(top + 1, chunk.start, mid), (top + 2, mid, chunk.end)]
            db.executemany("INSERT INTO chunks (id, start_item, end_item, parent) "
                           "VALUES (?, ?, ?, ?)", [(*h, chunk.id) for h in halves])
            return [Chunk(i, s, e, parent=chunk.id) for i, s, e in halves]

        return self._tx(go)  # type: ignore[no-any-return]

    def requeue_orphans(self, runner_alive: Callable[[str], bool],
                        exit_of: Callable[[Chunk], dict[str, Any] | None]) -> list[str]:
        """Chunks left running by a launcher that is gone: done if their supervisor recorded a
        clean exit, else pending again. Returns one line per chunk."""
        notes = []
        for c in self.chunks("running"):
            if c.runner and runner_alive(c.runner):
                continue
            ended = exit_of(c)
            if ended is not None and ended.get("status") == 0:
                self.finish(c.id, "done", exit_status=0, diagnosis=ended.get("diagnosis"),
                            peak=ended.get("memory_peak"))
                notes.append(f"chunk {c.id} had finished when its launcher died: its output "
                             f"committed, recorded done")
            else:
                self._tx(lambda db, c=c: db.execute(
                    "UPDATE chunks SET state='pending', attempts=MAX(attempts-1, 0) WHERE id=?",
                    (c.id,)))
                notes.append(f"chunk {c.id} was running when its launcher died: pending again")
        return notes


def _chunk(r: sqlite3.Row) -> Chunk:
    return Chunk(r["id"], r["start_item"], r["end_item"], r["state"], r["attempts"],
                 r["parent"], r["slot"], r["gpu"], r["runner"], r["started"], r["ended"],
                 r["exit_status"], r["diagnosis"], r["peak_bytes"], r["log_tail"])
