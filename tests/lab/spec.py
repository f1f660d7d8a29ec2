"""What the cgroup v2 lab runs: the layouts a caller can be in, the profiles, the scenarios.

Pure data, shared by the host side (host.py), the in-guest driver (guest.py) and the verdicts
(verdict.py); standard library only, since the guest imports it with no venv.
Cgroup paths are relative to the cgroup2 mount (`""` is the root cgroup).
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALL = ("cpu", "memory", "pids", "io")  # what the UML kernel offers (no cpuset)
USER = 1000  # the non-root caller of the user layouts
MIB = 1024 * 1024


@dataclass(frozen=True)
class Layout:
    """Where the caller (the process that runs `launcher run`) sits, and what is around it."""

    number: int
    name: str
    caller: str  # the caller's cgroup
    what: str  # one line for the table
    enable: tuple[tuple[str, tuple[str, ...]], ...] = ()  # top-down: controllers for children
    limits: tuple[tuple[str, str, str], ...] = ()  # (cgroup, file, value)
    sleepers: tuple[str, ...] = ()  # cgroups that each get another process (`sleep`)
    uid: int = 0
    entry: str | None = None  # root moves the caller here first (default: `caller`)
    delegate: str | None = None  # chowned to `uid` (directory, procs, subtree_control,
    # threads), and so is `entry` below it (as the user manager's init.scope)
    user_makes: bool = False  # the caller makes its own cgroup (under `entry`) and joins it
    namespace: bool = False  # private cgroup + mount namespace, cgroup2 remounted (Docker)
    expect: str = "enforced"  # enforced | advisory: what a limit asked for must get here

    @property
    def dirs(self) -> list[str]:
        """Every cgroup the guest makes (parents first); the user's own is made by the user."""
        named = [d for d, _ in self.enable] + [d for d, _, _ in self.limits] + \
            list(self.sleepers) + [self.entry or "", self.delegate or ""]
        if not self.user_makes:
            named.append(self.caller)
        out: list[str] = []
        for d in named:
            parts = [p for p in d.split("/") if p]
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in out:
                    out.append(sub)
        return out


_SYSTEMD = (("", ALL), ("user.slice", ALL))  # what systemd enables for login sessions

LAYOUTS: tuple[Layout, ...] = (
    Layout(1, "root", "", "caller in the root cgroup"),
    Layout(2, "container", "ctr", "caller alone in /ctr, all controllers offered",
           enable=(("", ALL),)),
    Layout(3, "container-ns", "ctr", "as container, in a cgroup+mount namespace (0::/)",
           enable=(("", ALL),), namespace=True),
    Layout(4, "scope", "user.slice/session-1.scope", "caller + a sleep in a session scope",
           enable=_SYSTEMD, sleepers=("user.slice/session-1.scope",)),
    Layout(5, "memory-only", "process_api/job",
           "caller alone in process_api/job (800M); process_api delegates memory only",
           enable=(("", ALL), ("process_api", ("memory",))),
           limits=(("process_api/job", "memory.max", "800M"),)),
    Layout(6, "delegated", "user.slice/user-1000.slice/user@1000.service/app.slice/term.scope",
           "uid 1000 alone in its own term.scope of a Delegate=yes subtree",
           enable=_SYSTEMD + (("user.slice/user-1000.slice", ALL),), uid=USER,
           entry="user.slice/user-1000.slice/user@1000.service/init.scope",
           delegate="user.slice/user-1000.slice/user@1000.service", user_makes=True),
    Layout(7, "nothing-delegated", "user.slice/user-1000.slice/session-2.scope",
           "uid 1000 in a session scope owned by root",
           enable=_SYSTEMD + (("user.slice/user-1000.slice", ALL),), uid=USER,
           expect="advisory"),
    Layout(8, "outer-pids", "outer/inner",
           "outer (pids 115) > inner (caller + sleep), other (sleep)",
           enable=(("", ALL), ("outer", ALL)), limits=(("outer", "pids.max", "115"),),
           sleepers=("outer/other", "outer/inner")),
    Layout(9, "limited-scope", "user.slice/session-3.scope",
           "caller + a sleep in a scope with pids 60, memory 300M (FIELD 34)",
           enable=_SYSTEMD, limits=(("user.slice/session-3.scope", "pids.max", "60"),
                                   ("user.slice/session-3.scope", "memory.max", "300M")),
           sleepers=("user.slice/session-3.scope",)),
    Layout(10, "two-limited", "a/b/c",
           "a (pids 100, 400M) > b (pids 70, 350M) > c (caller + sleep), d (sleep)",
           enable=(("", ALL), ("a", ALL), ("a/b", ALL)),
           limits=(("a", "pids.max", "100"), ("a", "memory.max", "400M"),
                   ("a/b", "pids.max", "70"), ("a/b", "memory.max", "350M")),
           sleepers=("a/b/c", "a/b/d")),
)

BY_NAME = {layout.name: layout for layout in LAYOUTS}

# profile stem -> its `limits:` (the file's `name:` is the stem, as launcher requires)
PROFILES: dict[str, dict[str, object]] = {
    "lab-none": {},
    "lab-pids40": {"pids": 40},
    "lab-mem200": {"memory": "200MiB"},
    "lab-cpu05": {"cpus": 0.5},
}


@dataclass(frozen=True)
class Scenario:
    profile: str
    workload: str  # bomb | hog | busy (tests/lab/workloads.py)
    arg: int  # threads, MiB, seconds
    require: bool = False
    asks: dict[str, float] = field(default_factory=dict)  # pids (tasks), memory (bytes), cpus

    @property
    def key(self) -> str:
        return f"{self.profile.removeprefix('lab-')}/{self.workload}" + \
            ("+require" if self.require else "")


def scenarios() -> list[Scenario]:
    """Per layout: the control, then each limit with its workload, without and with
    --require-limits; the CPU limit also with the bomb and the hog (FIELD 34's escape)."""
    out = [Scenario("lab-none", "bomb", 200)]
    for require in (False, True):
        out += [Scenario("lab-pids40", "bomb", 200, require, {"pids": 40}),
                Scenario("lab-mem200", "hog", 400, require, {"memory": 200 * MIB}),
                Scenario("lab-cpu05", "busy", 2, require, {"cpus": 0.5}),
                Scenario("lab-cpu05", "bomb", 200, require, {"cpus": 0.5}),
                Scenario("lab-cpu05", "hog", 400, require, {"cpus": 0.5})]
    return out
