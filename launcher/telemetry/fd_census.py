"""A census of one process's open files by what they are and where they lead: the same log
file open 37 times, 40 sockets to one address, pipes, eventfds and epolls (event loops),
/dev/shm segments. Read where the open files reach a new high (one readlink per descriptor),
so the growth line and the death name the leaking thing and the fix follows from it."""

from __future__ import annotations

import os
from collections import Counter

# what grows -> how to stop it
FIXES = {
    "file": "close each file it opens (`with open(...)`; a logging.FileHandler added per call: "
            "add it once, or removeHandler() and close() it)",
    "socket": "close each connection or session it opens (requests.Session and HTTP "
              "clients: `with` or .close(); reuse one session)",
    "pipe": "close each pipe it opens and join the processes and pools behind them "
            "(pool.close(); pool.join(), or `with Pool() as pool`)",
    "loop": "close each event loop it makes (loop.close() after loop.stop(); asyncio.run "
            "does both)",
    "shm": "close() and unlink() each shared memory segment it makes, and release its "
           "views first",
}


def _sockets(pid: int, proc: str) -> dict[str, str]:
    """socket inode -> `127.0.0.1:8080` (its peer; a listener's own address) or `unix`."""
    out: dict[str, str] = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/{pid}/net/{name}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        table = [cols for cols in (row.split() for row in rows) if len(cols) > 9]
        listening = {cols[1][-4:] for cols in table if cols[3] == "0A"}  # TCP_LISTEN's ports
        for cols in table:
            local, remote, inode = cols[1], cols[2], cols[9]
            # a client's sockets lead to one address; a server's (its port one a listener
            # holds) come from many to one
            out[inode] = (f"listening on {_address(local)}" if cols[3] == "0A" else
                          f"from clients of {_address(local)}" if local[-4:] in listening
                          else f"to {_address(remote)}")
    return out


def _address(hexed: str) -> str:
    host, _, port = hexed.partition(":")
    try:
        if len(host) == 8:
            ip = ".".join(str(int(host[i:i + 2], 16)) for i in (6, 4, 2, 0))
        else:
            ip = "[ipv6]"
        return f"{ip}:{int(port, 16)}"
    except ValueError:
        return hexed


def open_files(pid: int, proc: str = "/proc") -> Counter[tuple[str, str]]:
    """(kind, target) -> count: kind file, socket, pipe, loop (epoll, eventfd), shm, other."""
    out: Counter[tuple[str, str]] = Counter()
    base = f"{proc}/{pid}/fd/"
    try:
        fds = os.listdir(base)
    except OSError:
        return out
    socks: dict[str, str] | None = None
    for fd in fds:
        try:
            target = os.readlink(base + fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            if socks is None:
                socks = _sockets(pid, proc)
            out["socket", socks.get(target[8:-1], "(local, unix)")] += 1
        elif target.startswith("pipe:"):
            out["pipe", "pipes"] += 1
        elif target.startswith("anon_inode:"):
            what = target.split(":", 1)[1].strip("[]")
            out["loop" if what in ("eventpoll", "eventfd") else "other", what] += 1
        elif target.startswith("/dev/shm/"):
            out["shm", "/dev/shm"] += 1
        elif target == "/dev/null":
            continue  # never what leaks
        elif target.startswith("/"):
            out["file", target] += 1
        else:
            out["other", target.split(":", 1)[0]] += 1
    return out


def words(found: Counter[tuple[str, str]], owner: str) -> tuple[str, str] | None:
    """(`testlog.log open 37 times in python3 (pid 42)`, its kind) for the most held target;
    None where nothing is held more than a few times."""
    if not found:
        return None
    kinds: Counter[str] = Counter()
    for (kind, _), n in found.items():
        kinds[kind] += n
    # the target held most often is the leaking thing (a log file open 37 times, one
    # address's sockets), of the kind that holds most where two tie
    (kind, target), n = max(found.items(), key=lambda kv: (kv[1], kinds[kv[0][0]]))
    polls = found.get(("loop", "eventpoll"), 0)
    if kind == "socket" and polls >= 4 and n <= 2 * polls + 4:  # an event loop's self-pipe
        (kind, target), n = ("loop", "eventpoll"), polls  # (a socketpair) beside its epoll
    total = kinds[kind]
    if total < 4:
        return None
    if kind == "file":
        text = (f"{os.path.basename(target)} open {n} times" if n > 1 else
                f"{total} files ({os.path.dirname(target) or target})")
    elif kind == "socket":
        text = f"{n} sockets {target}" + (f" ({total} sockets in all)" if total > n else "")
    elif kind == "pipe":
        text = f"{total} pipes"
    elif kind == "loop":
        loops = {t: c for (k, t), c in found.items() if k == "loop"}
        text = ", ".join(f"{c} {t}s" for t, c in sorted(loops.items())) + " (event loops)"
        pairs = found.get(("socket", "(local, unix)"), 0)
        text += f" and {pairs} local sockets (their self-pipes)" if pairs else ""
    elif kind == "shm":
        text = f"{total} /dev/shm segments"
    else:
        text = f"{total} {target}"
    return f"{text} in {owner}", kind


read = open_files  # (the sampler's name for a census's reader)
