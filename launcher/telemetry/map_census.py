"""A census of one process's memory maps by what backs them: the same file mapped 400 times (an
np.memmap or mmap per batch), /dev/shm segments, anonymous maps (mmap without munmap, thread
stacks, allocator arenas). Read where the maps reach a new high (one read of /proc/PID/maps), so
the growth line and the death name the mapped thing and the fix follows from it."""

from __future__ import annotations

import os
from collections import Counter

# what grows -> how to stop it
FIXES = {
    "mapped_file": "drop each cycle's mapping of the file (del the np.memmap and its views, "
                   "mmap.close()), or map it once and reuse it",
    "mapped_shm": "close() and unlink() each shared memory segment it maps, and release its "
                  "views first",
    "anonymous": "munmap what each cycle maps, or cap its allocator's arenas "
                 "(MALLOC_ARENA_MAX) and join its threads (each stack is a map and a guard)",
}
PSEUDO = ("[heap]", "[stack]", "[vdso]", "[vvar]", "[vsyscall]", "[vvar_vclock]")


def mapped(pid: int, proc: str = "/proc") -> Counter[tuple[str, str]]:
    """(kind, target) -> maps: kind mapped_file (its path), mapped_shm, anonymous, other."""
    out: Counter[tuple[str, str]] = Counter()
    try:
        with open(f"{proc}/{pid}/maps", "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        # address perms offset dev inode [path]; the path may hold spaces
        cols = line.split(maxsplit=5)
        path = cols[5].strip() if len(cols) > 5 else ""
        if path.endswith(" (deleted)"):
            path = path[:-10]
        if not path or path == "/dev/zero":  # (shared anonymous memory maps /dev/zero)
            out["anonymous", ""] += 1
        elif path.startswith(("/dev/shm/", "/memfd:")):
            out["mapped_shm", path] += 1
        elif path.startswith("/"):
            out["mapped_file", path] += 1
        elif path not in PSEUDO:
            out["other", path] += 1
    return out


def words(found: Counter[tuple[str, str]], owner: str) -> tuple[str, str] | None:
    """(`weights.bin mapped 412 times in python3 (pid 42)`, its kind) for what holds the most
    maps beyond a program's usual (a library maps 4-5 segments); None where nothing does."""
    if not found:
        return None
    kinds: Counter[str] = Counter()
    for (kind, _), n in found.items():
        kinds[kind] += n
    files = {t: n for (k, t), n in found.items() if k == "mapped_file"}
    target, n = max(files.items(), key=lambda kv: kv[1], default=("", 0))
    anon = kinds["anonymous"]
    if n > 16 and n * 4 >= anon:  # one file's mappings, far beyond a library's segments
        return f"{os.path.basename(target)} mapped {n} times in {owner}", "mapped_file"
    if kinds["mapped_shm"] > 16 and kinds["mapped_shm"] * 4 >= anon:
        return f"{kinds['mapped_shm']} /dev/shm and memfd maps in {owner}", "mapped_shm"
    if anon >= 64 and anon * 2 >= sum(kinds.values()):
        return f"{anon} anonymous maps in {owner}", "anonymous"
    return None


read = mapped  # (the sampler's name for a census's reader)
