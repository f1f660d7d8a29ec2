"""Where a run's cgroup goes, so that the kernel can enforce the controllers it needs.

Pure: it reads the host only through `root` (and the `writable` check and the set of
launcher's own processes, both passed in), and decides; `run_cgroup.make_placed` acts.

cgroup v1: a child of the caller's cgroup in each needed controller's hierarchy, when that
directory is writable (v1 has no rule against processes in inner cgroups).

cgroup v2 has two rules that decide it (kernel cgroup-v2.rst): a cgroup's children get a
controller only when its `cgroup.subtree_control` lists it, which may only name controllers
of its own `cgroup.controllers` (else ENOENT); and a non-root cgroup whose subtree_control is
not empty may hold no process ("no internal processes": EBUSY). So, in this order, the first
place that can take every needed controller (else the one that takes the most, the first
among equals):

1. the caller's own cgroup C, directly, when C is the real root (it has no `cgroup.type`
   file; a namespace's top has one), which is exempt from the second rule;
2. C again, when C is writable and every process in it is launcher's (this process and its
   children): they move into the leaf C/launcher-leaf first, then the controllers are
   enabled in C. This is Docker-in-Docker's entrypoint (moby hack/dind: `mkdir init`, each
   PID of cgroup.procs into init/cgroup.procs, then `+controllers` into subtree_control),
   what runc's nested setups need, and systemd's `Delegate=` contract (the delegated unit
   moves its own processes into a subgroup; DelegateSubgroup= does it for it). It comes
   before 3 because it touches no cgroup but launcher's own: one that is not delegated
   belongs to its manager (systemd may reset its controllers);
3. the nearest ancestor A of C that can give the controllers to a child: each one already in
   A's subtree_control, or enabled top-down from the nearest cgroup that offers it (in its
   cgroup.controllers) through every cgroup down to A, as runc's fs2 CreateCgroupPath does;
   each of those must be writable and the root or empty of processes. The run's cgroup is
   then a child of A, beside C's branch (as root, usually the parent of a session scope or
   of a service). This is how a root shell in a login session gets its limits;
4. otherwise the controller is advisory, with one sentence saying why and what would give
   launcher a cgroup of its own (`systemd-run --user --scope -p Delegate=yes`, or a
   container runtime, which makes one per container). A Kubernetes pod lands here: the
   kubelet gives each container a private cgroup namespace and a read-only cgroupfs, and
   enforces the pod's limits itself.

Each controller is judged apart: one that no place can take never makes the others
advisory. A controller is v1 when a v1 hierarchy holds it (hybrid hosts), else v2.

Never loosen (step 3). A run cgroup under A leaves C and every cgroup between C and A, and
with them their limits: the kernel charges a task only to its own cgroup's ancestors. systemd
never moves a process out of the scope it was started in, and runc makes the cgroup its
configuration names or fails; launcher does move the run out, so it first reads every limit
of the cgroups it leaves (`LIMIT_FILES`: pids.max, memory.max, memory.high, memory.swap.max,
cpu.max, and a cpuset as the caller's effective one) and carries the tightest of each onto the
run's own cgroup (`carry`), whose controllers must then be enabled under A too. A place that
cannot carry one of them, or that would leave a limit launcher does not carry (`UNCARRIED`:
io.max, hugetlb, rdma, misc, zswap), is not taken (the asked limits are advisory there, and
refused with --require-limits). What is carried is the limit, not the sharing: the processes
left behind no longer count against it.
Steps 1 and 2 leave nothing: the run stays under C.
"""

from __future__ import annotations

import os
import time
import typing
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from launcher.cgroups.advisory import Advisory
from launcher.cgroups.leaf import LEAF
from launcher.probe.cgroup import cgroup_dirs, holding_mount
from launcher.probe.mountinfo import Membership, Mount, parse_mountinfo, parse_proc_cgroup
from launcher.proctree import descendants

FIX = ("fix: start launcher in a cgroup of its own (`systemd-run --user --scope -p Delegate=yes "
       "launcher run ...`) or use --runtime docker")

NO_CONTROLLER = "cgroup v2 has no {c} controller on this kernel"  # no cgroup of ours would help
Writable = typing.Callable[[Path], bool]  # typing's: 3.8 evaluates it
# controller -> its limit files that bound a task in the cgroup (and below): what a run
# carries when it leaves a cgroup that holds one
LIMIT_FILES = {"pids": ("pids.max",), "memory": ("memory.max", "memory.high", "memory.swap.max"),
               "cpu": ("cpu.max",), "cpuset": ("cpuset.cpus", "cpuset.mems")}
# limits launcher does not carry: a cgroup that sets one is never left (no place beside it)
UNCARRIED = ("io.max", "memory.zswap.max", "rdma.max", "misc.max", "hugetlb.*.max")


@dataclass(frozen=True)
class Carried:
    """A limit of a cgroup the run leaves, written onto the run's own cgroup."""

    file: str  # e.g. pids.max
    value: str  # as the kernel takes it: "60", "50000 100000", "0-3"
    source: Path  # the cgroup that had it (the tightest of those left)

    @property
    def controller(self) -> str:
        return self.file.partition(".")[0]


@dataclass(frozen=True)
class Placement:
    """Where one run cgroup is made, and what must be done first."""

    version: str  # v1 | v2
    parent: Path  # the run's cgroup is made here
    controllers: tuple[str, ...]  # those it enforces
    enable: tuple[tuple[Path, tuple[str, ...]], ...] = ()  # v2, top-down: +controllers there
    leaf: Path | None = None  # v2: move `move` from `parent` into this leaf first
    move: tuple[int, ...] = ()
    carry: tuple[Carried, ...] = ()  # v2, beside: the limits of the cgroups it leaves
    mode: str = "own"  # root | own (a child of the caller's) | leaf | beside (under an ancestor)
    caller: Path | None = None  # the caller's cgroup in this hierarchy

    def describe(self) -> str:
        """Where, in words (summary.json, doctor)."""
        what = {"root": "a child of the root cgroup",
                "own": f"a child of the caller's cgroup {self.caller}",
                "leaf": f"a child of the caller's cgroup {self.caller}, launcher's own "
                        f"processes moved into {self.leaf}",
                "beside": f"a child of {self.parent}, beside the caller's cgroup "
                          f"{self.caller}"}[self.mode]
        return f"cgroup {self.version}: {what}"


@dataclass(frozen=True)
class Decision:
    placements: tuple[Placement, ...]
    advisory: dict[str, str]  # controller -> why it cannot be enforced here, and the fix


def can_write(path: Path) -> bool:
    return os.access(path, os.W_OK)


def own_processes() -> set[int]:
    """This process and its descendants: what may move into the leaf."""
    return {os.getpid(), *descendants(os.getpid())}


def place(controllers: Iterable[str], root: Path = Path("/"), *, pid: str = "self",
          writable: Writable = can_write, ours: Collection[int] | None = None) -> Decision:
    """Where the run cgroup of PID's caller goes for `controllers` (e.g. pids, memory, cpu)."""
    wanted = list(dict.fromkeys(controllers))
    mounts = parse_mountinfo(root / "proc/self/mountinfo")
    members = parse_proc_cgroup(root / f"proc/{pid}/cgroup")
    placements: list[Placement] = []
    advisory: dict[str, str] = {}
    v2: list[str] = []
    v1: dict[Path, list[str]] = {}
    for c in wanted:
        member = next((m for m in members if c in m.controllers), None)
        mount = holding_mount(root, [m for m in mounts if m.fstype == "cgroup"
                                and c in m.super_options], member)
        if member is not None and mount is not None:
            v1.setdefault(cgroup_dirs(root, mount, member)[0], []).append(c)
        elif _unified(root, mounts, members) is not None:
            v2.append(c)
        else:
            advisory[c] = f"no cgroup controller found for {c}"
    for d, cs in v1.items():
        if writable(d):
            placements.append(Placement("v1", d, tuple(cs), caller=d))
        else:
            advisory.update({c: Advisory(f"cannot write {d} (cgroup v1 {c})", FIX) for c in cs})
    _, holding = _unified_mount(root, mounts, members)
    outside = holding if holding is not None and holding.root.startswith("/..") else None
    if v2 and outside is not None:  # a cgroup namespace seeing a cgroupfs mounted above it
        advisory.update({c: Advisory(f"cgroup v2 {c}: this process's cgroup namespace sees "
                                     f"{outside.mount_point} mounted from outside it (its root "
                                     f"is {outside.root}), so its own cgroup is not there to "
                                     f"find", "mount cgroup2 inside the namespace, as container "
                                     "runtimes do")
                         for c in v2})
        v2 = []
    if v2:
        dirs = _unified(root, mounts, members)
        assert dirs is not None
        found, why = _place_v2(v2, dirs, writable,
                               set(own_processes() if ours is None else ours))
        if found is not None:
            placements.append(found)
        advisory.update(why)
    return Decision(tuple(placements), {c: advisory[c] for c in wanted if c in advisory})


def search_dirs(root: Path = Path("/"), pid: str = "self") -> list[Path]:
    """Every place the rule may have put a run cgroup: the caller's cgroup and each of its
    ancestors, in every hierarchy with controllers (v1 and v2)."""
    mounts = parse_mountinfo(root / "proc/self/mountinfo")
    members = parse_proc_cgroup(root / f"proc/{pid}/cgroup")
    found = list(_unified(root, mounts, members) or ())
    for member in members:
        if not member.controllers:
            continue
        mount = holding_mount(root, [m for m in mounts if m.fstype == "cgroup"
                                and member.controllers & m.super_options], member)
        if mount is not None:
            found += cgroup_dirs(root, mount, member)
    return list(dict.fromkeys(found))


def empty_leaves(root: Path = Path("/"), pid: str = "self") -> list[Path]:
    """Every empty `launcher-leaf` in the visible cgroup v2 tree: a leaf move that no launcher
    and no supervisor lived to undo (its cgroup takes no process while it keeps the
    controllers on for the leaf). The whole tree is searched: the caller of `doctor` is
    usually not where the killed run was, and cannot join that cgroup."""
    mounts = parse_mountinfo(root / "proc/self/mountinfo")
    dirs = _unified(root, mounts, parse_proc_cgroup(root / f"proc/{pid}/cgroup"))
    if not dirs:
        return []
    found = []
    for top, subdirs, _files in os.walk(dirs[-1]):
        if os.path.basename(top) == LEAF and not _procs(Path(top)) and _abandoned(Path(top)):
            found.append(Path(top))
        subdirs[:] = [d for d in subdirs if not d.startswith("launcher-") or d == LEAF]
    return sorted(found)


def _abandoned(leaf: Path, settle_s: float = 10.0) -> bool:
    """An empty leaf is left over only when nothing else sits beside it (an entrypoint's own
    supervisor leaves its leaf empty for a workload cgroup beside it while it runs) and it is
    not one a launcher is just making (made in the last `settle_s`)."""
    try:
        beside = [e for e in os.scandir(leaf.parent) if e.is_dir() and e.name != LEAF]
        young = time.time() - leaf.stat().st_mtime < settle_s
    except OSError:
        return False
    return not beside and not young


def _place_v2(wanted: list[str], dirs: tuple[Path, ...], writable: Writable,
              ours: set[int]) -> tuple[Placement | None, dict[str, str]]:
    """The rule's steps over `dirs`: C's cgroup (1, 2), its ancestors up to the visible top
    (3, carrying the limits of what it leaves), and the sentences for what none can take (4)."""
    own = dirs[0]
    candidates: list[tuple[int, Path | None, tuple[int, ...], str]] = []  # index, leaf, move
    procs = _procs(own)
    if not writable(own):
        candidates.append((0, None, (), f"cannot write {own}"))
    elif _is_root(own) or not procs:
        candidates.append((0, None, (), ""))
    elif set(procs) - ours:
        others = ", ".join(map(str, sorted(set(procs) - ours)[:3]))
        candidates.append((0, None, (), f"{own} holds other processes (PID {others})"))
    elif not writable(own / "cgroup.procs"):
        candidates.append((0, None, (), f"cannot write {own / 'cgroup.procs'}"))
    else:
        candidates.append((0, own / LEAF, tuple(procs), ""))
    candidates += [(i, None, (), "" if writable(dirs[i]) else f"cannot write {dirs[i]}")
                   for i in range(1, len(dirs))]

    best: Placement | None = None
    first_why: dict[str, str] = {}  # the caller's own cgroup, and the nearest ancestor
    for index, leaf, move, blocked in candidates:
        carry = carried_limits(dirs[:index])
        taken: dict[str, list[int]] = {}
        why: dict[str, str] = {}
        for c in dict.fromkeys([*wanted, *(k.controller for k in carry)]):
            path = blocked or _enable_path(c, dirs, index, writable, emptied=leaf is not None)
            if isinstance(path, str):
                why[c] = path
            else:
                taken[c] = path
        lost = [k for k in carry if k.controller in why]
        kept_out = uncarried_limits(dirs[:index])
        if lost or kept_out:  # placing here would loosen a limit the run is under: not here
            reason = (f"a run under {dirs[index]} would leave the {lost[0].file} "
                      f"{lost[0].value} of {lost[0].source}, which it could not carry "
                      f"({why[lost[0].controller]})" if lost else
                      f"a run under {dirs[index]} would leave the {kept_out[0]}, which "
                      f"launcher does not carry")
            why = {c: reason for c in wanted}
            taken = {}
        if index <= 1:
            for c, w in why.items():
                if c in wanted:
                    first_why[c] = f"{first_why[c]}, and {w}" if c in first_why else w
        got = [c for c in wanted if c in taken]
        if got and (best is None or len(got) > len(best.controllers)):
            best = _placement(dirs, index, leaf=leaf, move=move, taken=taken, got=got,
                              carry=carry)
        if len(got) == len(wanted):
            break
    enforced = set(best.controllers) if best else set()
    if len(dirs) == 1 and not _is_root(own):
        first_why = {c: f"{w}, and no cgroup above it is visible" for c, w in first_why.items()}
    missing = [c for c in wanted if c not in enforced]
    return best, {c: NO_CONTROLLER.format(c=c) if first_why.get(c) == NO_CONTROLLER.format(c=c)
                  else Advisory(f"cgroup v2 {c}: {first_why.get(c, 'no place found')}", FIX)
                  for c in missing}


def carried_limits(left: Sequence[Path]) -> tuple[Carried, ...]:
    """The tightest of each limit file among the cgroups a run would leave (`left`, leaf
    first); nothing for "max" or an unset cpuset. A cpuset set anywhere there is carried as
    the caller's effective one (what the kernel made of every level's)."""
    out: list[Carried] = []
    for files in LIMIT_FILES.values():
        for name in files:
            best: tuple[float, str, Path] | None = None
            for d in left:
                text = _read_text(d / name)
                if not text or text.split()[0] == "max":
                    continue
                if name.startswith("cpuset."):
                    effective = _read_text(left[0] / f"{name}.effective")
                    if effective:
                        best = (0.0, effective, d)
                        break  # the nearest that sets it is named as its source
                    continue  # pragma: no mutate (left[0]'s file: no later level has it)
                fields = text.split()
                try:
                    size = (int(fields[0]) / int(fields[1]) if name == "cpu.max"
                            else float(int(fields[0])))
                except (ValueError, IndexError, ZeroDivisionError):
                    continue
                if best is None or size < best[0]:
                    best = (size, text, d)
            if best is not None:
                out.append(Carried(name, best[1], best[2]))
    return tuple(out)


def uncarried_limits(left: Sequence[Path]) -> list[str]:
    """Limits set in the cgroups a run would leave that launcher does not carry (`io.max`,
    `hugetlb.*.max`, ...), each as "FILE VALUE of DIR"."""
    out = []
    for d in left:
        for pattern in UNCARRIED:
            for f in sorted(d.glob(pattern)):
                text = _read_text(f)
                keyed = f.name in ("io.max", "rdma.max", "misc.max")  # "KEY a=V b=V" lines
                values = [w.partition("=")[2] or w for line in text.splitlines()
                          for w in (line.split()[1:] if keyed else line.split())]
                if text and not all(_unlimited(v) for v in values):
                    out.append(f"{f.name} {text.splitlines()[0]!r} of {d}")
    return out


def _unlimited(value: str) -> bool:
    """"max", or the huge page-aligned number some kernels show for it (hugetlb on 5.x)."""
    return value == "max" or (value.isdigit() and int(value) >= 1 << 62)


def _enable_path(c: str, dirs: tuple[Path, ...], index: int, writable: Writable,
                 emptied: bool) -> list[int] | str:
    """The cgroups (indexes in `dirs`, top-down) whose subtree_control must get `+c` so that
    a child of dirs[index] has it; or why that cannot be."""
    need: list[int] = []
    for j in range(index, len(dirs)):
        d = dirs[j]
        if c in _read_set(d / "cgroup.subtree_control"):
            break
        if not writable(d / "cgroup.subtree_control"):
            return f"cannot write {d / 'cgroup.subtree_control'}"
        if not _is_root(d) and _procs(d) and not (emptied and j == index):
            return f"{d} holds processes (a cgroup that gives controllers to children may not)"
        need.append(j)
        if c in _read_set(d / "cgroup.controllers"):
            break
        if _is_root(d):
            return NO_CONTROLLER.format(c=c)
        if j == len(dirs) - 1:
            return f"{d} does not offer {c} (the cgroup above it does not delegate it)"
    return need[::-1]


def _placement(dirs: tuple[Path, ...], index: int, *, leaf: Path | None, move: tuple[int, ...],
               taken: dict[str, list[int]], got: list[str],
               carry: tuple[Carried, ...]) -> Placement:
    order = sorted({j for js in taken.values() for j in js}, reverse=True)  # top first
    enable = tuple((dirs[j], tuple(c for c in taken if j in taken[c])) for j in order)
    moving = leaf is not None and 0 in order  # only to enable controllers in C itself
    mode = ("beside" if index else "root" if _is_root(dirs[0]) else
            "leaf" if moving else "own")
    return Placement("v2", dirs[index], tuple(got), enable, leaf if moving else None,
                     move if moving else (), carry, mode, dirs[0])


def _unified(root: Path, mounts: list[Mount],
             members: list[Membership]) -> tuple[Path, ...] | None:
    """The caller's v2 cgroup and its ancestors (leaf first), when there is a v2 mount."""
    member, mount = _unified_mount(root, mounts, members)
    if member is None or mount is None:
        return None
    return cgroup_dirs(root, mount, member)


def _unified_mount(root: Path, mounts: list[Mount], members: list[Membership]
                   ) -> tuple[Membership | None, Mount | None]:
    """The caller's v2 membership and the cgroup2 mount that holds it."""
    member = next((m for m in members if m.hierarchy == "0" and not m.controllers), None)
    return member, holding_mount(root, [m for m in mounts if m.fstype == "cgroup2"], member)


def _is_root(d: Path) -> bool:
    """The real root cgroup has no cgroup.type (a namespace's top has one)."""
    return not (d / "cgroup.type").exists()


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _read_set(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _procs(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []
