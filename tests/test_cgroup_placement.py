"""Where a native run's cgroup goes (launcher/cgroups/placement.py): the rule on fixture
trees for each v1/v2 case, the CLI's sentence and --require-limits, and the v2 mechanics on a
real cgroup2 mount (hugetlb standing in for pids, memory and cpu).

Fixtures (tests/fixtures/placement/CASE): proc/self/{cgroup,mountinfo} and the cgroup
directories with cgroup.controllers, cgroup.subtree_control, cgroup.procs and cgroup.type
(absent at the real root, as the kernel has it). Launcher is PID 100 in each. Tests run as
root, so which directories launcher may write is the file `writable` (one path a line, the
subtree below it included), passed to the rule as its `writable` check.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.cgroups.placement import FIX, Carried, Decision, Placement, place
from launcher.cgroups.run_cgroup import make_placed, make_run_cgroup
from tests.conftest import FIXTURES, ROOT, need
from tests.docker_helpers import launcher, profile
from tests.polling import wait_until

CASES = FIXTURES / "placement"
LAUNCHER = {100}
WANTED = ("pids", "memory", "cpu")


def _writable(root: Path):  # type: ignore[no-untyped-def]
    granted = [root / line for line in (root / "writable").read_text().split()]
    return lambda p: any(p == g or g in p.parents for g in granted)


def _place(case: str, root: Path | None = None) -> tuple[Path, Decision]:
    root = root or CASES / case
    return root, place(WANTED, root, writable=_writable(root), ours=LAUNCHER)


def test_v1_a_child_of_the_callers_cgroup_in_each_hierarchy():
    root, d = _place("v1")
    cg = root / "sys/fs/cgroup"
    assert d == Decision(tuple(Placement("v1", cg / h / "user.slice", (c,), caller=cg / h /
                                         "user.slice")
                               for h, c in (("pids", "pids"), ("memory", "memory"),
                                            ("cpu,cpuacct", "cpu"))), {})


def test_v2_root_a_child_of_the_root_which_may_hold_processes():
    root, d = _place("v2-root")
    cg = root / "sys/fs/cgroup"
    assert d == Decision((Placement("v2", cg, WANTED, ((cg, ("pids", "cpu")),), mode="root",
                                    caller=cg),), {})


def test_v2_a_controller_the_kernel_lacks_is_said_so_and_the_others_kept():
    root = CASES / "v2-root"
    d = place(("pids", "rdma"), root, writable=_writable(root), ours=LAUNCHER)
    assert [p.controllers for p in d.placements] == [("pids",)]
    assert d.advisory == {"rdma": "cgroup v2 has no rdma controller on this kernel"}


def test_v2_delegated_and_alone_launcher_moves_into_a_leaf_first():
    root, d = _place("v2-delegated-alone")
    scope = root / ("sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/"
                    "run-r1.scope")
    assert d == Decision((Placement("v2", scope, WANTED, ((scope, WANTED),),
                                    scope / "launcher-leaf", (100,), mode="leaf",
                                    caller=scope),), {})


def test_v2_with_other_processes_a_sibling_under_the_ancestor_enabled_top_down():
    root, d = _place("v2-siblings")
    cg = root / "sys/fs/cgroup"
    assert d == Decision((Placement("v2", cg / "user.slice", WANTED,
                                    ((cg, ("cpu",)), (cg / "user.slice", ("cpu",))),
                                    mode="beside", caller=cg / "user.slice/session-1.scope"),),
                         {})


def test_v2_an_ancestor_that_holds_processes_is_passed_over():
    root, d = _place("v2-ancestor-holds-processes")
    cg = root / "sys/fs/cgroup/system.slice"
    assert d == Decision((Placement("v2", cg, WANTED, ((cg, ("cpu",)),), mode="beside",
                                    caller=cg / "app.service/worker"),), {})


def test_v2_parent_not_delegating_memory_enforced_pids_and_cpu_explained():
    root, d = _place("v2-parent-not-delegating")
    cg = root / "sys/fs/cgroup"
    why = (f"{cg / 'session-3.scope'} holds other processes (PID 812), and {cg} does not offer "
           "{c} (the cgroup above it does not delegate it)")
    assert d == Decision((Placement("v2", cg, ("memory",), ((cg, ("memory",)),),
                                    mode="beside", caller=cg / "session-3.scope"),),
                         {c: f"cgroup v2 {c}: {why.format(c=c)}; {FIX}" for c in ("pids", "cpu")})


def test_v2_nothing_writable_each_controller_gets_the_sentence():
    root, d = _place("v2-nothing-writable")
    why = f"cannot write {root / 'sys/fs/cgroup'}, and no cgroup above it is visible"
    assert d == Decision((), {c: f"cgroup v2 {c}: {why}; {FIX}" for c in WANTED})


def test_one_controller_missing_leaves_the_others_enforced(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-parent-not-delegating", root)
    rc = make_run_cgroup("launcher-100-r", pids=40, memory=64 << 20, cpus=1.5, root=root,
                         writable=_writable(root), ours=LAUNCHER)
    cg = root / "sys/fs/cgroup"
    assert rc.enforced == {"memory": "64MiB (cgroup v2 memory)"}
    assert sorted(rc.advisory) == ["cpus", "pids"]
    assert rc.advisory["pids"].startswith(f"cgroup v2 pids: {cg / 'session-3.scope'} holds")
    assert (cg / "launcher-100-r" / "memory.max").read_text() == str(64 << 20)
    assert (cg / "cgroup.subtree_control").read_text() == "+memory"
    assert not (cg / "launcher-100-r" / "pids.max").exists()


def test_v2_beside_a_limited_scope_carries_every_limit_it_leaves():
    """FIELD.md 34: asking only for a CPU quota must not take the run out from under the
    scope's pids.max 60 and memory.max 300M; the tightest of each is carried, and the
    controllers to carry them are enabled beside it."""
    root = CASES / "v2-limited-scope"
    d = place(("cpu",), root, writable=_writable(root), ours=LAUNCHER)
    cg = root / "sys/fs/cgroup"
    scope = cg / "user.slice/session-1.scope"
    assert d == Decision((Placement(
        "v2", cg / "user.slice", ("cpu",),
        ((cg, ("cpu",)), (cg / "user.slice", ("cpu",))), mode="beside", caller=scope,
        carry=(Carried("pids.max", "60", scope), Carried("memory.max", "314572800", scope),
               Carried("memory.high", "268435456", scope))),), {})


def test_v2_the_tightest_along_every_level_left_is_carried(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-limited-scope", root)
    scope = root / "sys/fs/cgroup/user.slice/session-1.scope"
    (scope.parent / "pids.max").write_text("50")  # the slice is left too when it is passed
    (scope.parent / "cgroup.procs").write_text("4242")  # over: it holds a process now
    d = place(("cpu",), root, writable=_writable(root), ours=LAUNCHER)
    [p] = d.placements
    assert (p.parent, p.mode) == (root / "sys/fs/cgroup", "beside")
    assert {k.file: (k.value, k.source) for k in p.carry} == {
        "pids.max": ("50", scope.parent), "memory.max": ("314572800", scope),
        "memory.high": ("268435456", scope)}
    assert p.enable == ((root / "sys/fs/cgroup", ("cpu",)),)  # pids, memory: on there already


def test_v2_an_outer_pids_max_that_holds_a_process_is_carried_to_the_root():
    """The trial's outer 115: the caller's cgroup and its parent both hold processes, so the
    run goes to the root, carrying pids.max 115."""
    root = CASES / "v2-outer-pids"
    d = place(("memory",), root, writable=_writable(root), ours=LAUNCHER)
    cg = root / "sys/fs/cgroup"
    [p] = d.placements
    assert (p.parent, p.mode, p.carry) == (cg, "beside", (Carried("pids.max", "115",
                                                                   cg / "outer"),))


def test_carried_limits_are_written_and_an_asked_one_never_loosens_them(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-limited-scope", root)
    rc = make_run_cgroup("launcher-100-r", pids=150, memory=1 << 30, cpus=0.5, root=root,
                         writable=_writable(root), ours=LAUNCHER)
    run = root / "sys/fs/cgroup/user.slice/launcher-100-r"
    assert (run / "pids.max").read_text() == "60"  # 150 asked, 60 left behind: 60
    assert (run / "memory.max").read_text() == "314572800"
    assert (run / "memory.high").read_text() == "268435456"
    assert (run / "cpu.max").read_text() == "50000 100000"
    assert rc.placed[0]["mode"] == "beside"
    assert any("carries pids.max 60" in n and "no longer shared" in n for n in rc.notes)


def test_v2_a_limit_launcher_does_not_carry_keeps_the_run_from_leaving(tmp_path):
    """io.max (or hugetlb, rdma, misc, zswap) set where the run would leave it: no place
    beside; the asked limit is advisory, with why."""
    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-limited-scope", root)
    scope = root / "sys/fs/cgroup/user.slice/session-1.scope"
    (scope / "misc.max").write_text("res_a max\nres_b max\n")  # defaults: carried by nothing
    (scope / "hugetlb.2MB.max").write_text("max\n")
    (scope / "hugetlb.1GB.max").write_text("9223372036854771712\n")  # "max" on kernel 5.x
    assert [p.mode for p in place(("cpu",), root, writable=_writable(root),
                                  ours=LAUNCHER).placements] == ["beside"]
    (scope / "io.max").write_text("8:0 rbps=max wbps=1048576 riops=max wiops=max\n")
    d = place(("cpu",), root, writable=_writable(root), ours=LAUNCHER)
    assert d.placements == ()
    assert (f"would leave the io.max '8:0 rbps=max wbps=1048576 riops=max wiops=max' of "
            f"{scope}, which launcher does not carry") in d.advisory["cpu"]


def test_v2_a_cpuset_is_carried_as_the_callers_effective_one(tmp_path):
    """A child's cpuset.cpus outside its parent's falls back to the parent's: the effective
    set is what bound the caller, never an empty intersection (which would mean all CPUs)."""
    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-limited-scope", root)
    scope = root / "sys/fs/cgroup/user.slice/session-1.scope"
    (scope / "cpuset.cpus").write_text("4-7\n")
    (scope / "cpuset.cpus.effective").write_text("0-3\n")
    [p] = place(("cpu",), root, writable=_writable(root), ours=LAUNCHER).placements
    assert Carried("cpuset.cpus", "0-3", scope) in p.carry


def test_v2_a_namespace_seeing_a_cgroupfs_from_outside_places_nothing(tmp_path):
    """`unshare --cgroup` without a new cgroup2 mount: /proc/self/cgroup says 0::/ while the
    mount shows the host's whole tree (its root /..): the top of that mount is not ours, and
    a run there would leave every limit of the real cgroup (seen in the v2 lab)."""
    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-root", root)
    mi = root / "proc/self/mountinfo"
    mi.write_text(mi.read_text().replace(" / /sys/fs/cgroup ", " /.. /sys/fs/cgroup "))
    d = place(("pids",), root, writable=_writable(root), ours=LAUNCHER)
    assert d.placements == ()
    assert d.advisory["pids"].startswith("cgroup v2 pids: this process's cgroup namespace sees "
                                         "/sys/fs/cgroup mounted from outside it (its root is /..)")


def test_a_tighter_carried_memory_limit_still_gets_no_swap(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-limited-scope", root)
    make_run_cgroup("launcher-100-r", pids=None, memory=1 << 30, cpus=None, root=root,
                    writable=_writable(root), ours=LAUNCHER)
    run = root / "sys/fs/cgroup/user.slice/launcher-100-r"
    assert (run / "memory.max").read_text() == "314572800"  # the scope's 300M, carried
    assert (run / "memory.swap.max").read_text() == "0"  # and no swap beyond it, as asked


def test_a_leaf_move_that_fails_half_way_is_undone(tmp_path, monkeypatch):
    """The caller's cgroup is left as found even when enabling a controller fails after
    launcher moved into the leaf (a process joined meanwhile: EBUSY)."""
    import launcher.cgroups.run_cgroup as rcg

    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-delegated-alone", root)
    scope = root / ("sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/"
                    "run-r1.scope")

    def half_way(p: Placement, name: str) -> Path:
        assert p.leaf is not None
        p.leaf.mkdir()
        (p.leaf / "cgroup.procs").write_text("100")
        (p.parent / "cgroup.procs").write_text("")
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(rcg, "make_placed", half_way)
    # cgroupfs removes a directory with its interface files; a fixture tree needs help
    real_rmdir = os.rmdir

    def rmdir(d: str, *args: object, **kw: object) -> None:
        for f in Path(d).iterdir() if not args and not kw else ():
            if f.is_file():
                f.unlink()
        real_rmdir(d, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr("launcher.cgroups.leaf.os.rmdir", rmdir)
    rc = rcg.make_run_cgroup("launcher-100-r", pids=40, memory=None, cpus=None, root=root,
                             writable=_writable(root), ours=LAUNCHER)
    assert rc.advisory["pids"].startswith("cannot make a pids cgroup (v2): Device or "
                                          "resource busy")
    assert not (scope / "launcher-leaf").exists()  # undone: launcher back in its cgroup
    assert (scope / "cgroup.procs").read_text().split() == ["100"]


# The CLI: the sentence before the start, and --require-limits


def test_leftovers_found_where_the_rule_put_them(tmp_path):
    """A run cgroup under an ancestor (v2-siblings) whose launcher is gone is a leftover."""
    from launcher.runtime.native import NativeEngine

    root = tmp_path / "host"
    shutil.copytree(CASES / "v2-siblings", root)
    dead = subprocess.Popen(["true"])
    dead.wait()
    run = root / "sys/fs/cgroup/user.slice" / f"launcher-{dead.pid}-r1"
    run.mkdir()
    (run / "cgroup.procs").write_text("")
    assert [x.ident for x in NativeEngine(root).leftovers()] == [str(run)]


def test_the_sentence_comes_before_the_run_starts(tmp_path):
    prof = profile(tmp_path, "p40", "extends: base\nlimits: {pids: 40}\n")
    proc = launcher("run", "--runtime", "native", "-p", prof, "--", sys.executable, "-c",
                    "import sys; print('ran', file=sys.stderr)",
                    env={"LAUNCHER_CGROUP_ROOT": str(tmp_path / "no-cgroups")})
    assert proc.returncode == 0, proc.stderr
    warning = ("launcher: warning: the pids limit (no cgroup controller found for pids) cannot "
               "be enforced here")
    assert warning in proc.stderr
    assert proc.stderr.index(warning) < proc.stderr.index("ran")


def test_require_limits_refuses_in_one_line_and_leaves_nothing(tmp_path):
    host = tmp_path / "host"
    shutil.copytree(CASES / "v2-parent-not-delegating", host)
    before = sorted(p.relative_to(host) for p in host.rglob("*"))
    prof = profile(tmp_path, "p40", "extends: base\nlimits: {pids: 40, memory: 1GiB}\n")
    proc = launcher("run", "--runtime", "native", "--require-limits", "-p", prof, "--",
                    sys.executable, "-c", "print('ran')", env={"LAUNCHER_CGROUP_ROOT": str(host)})
    assert proc.returncode == 1
    assert "ran" not in proc.stdout
    cg = host / "sys/fs/cgroup"
    why = (f"{cg / 'session-3.scope'} holds other processes (PID 100, 812), and {cg} does not "
           "offer pids (the cgroup above it does not delegate it)")
    assert proc.stderr.splitlines()[-1] == (  # memory could be enforced: not named
        f"error: --require-limits: not started: the pids limit (cgroup v2 pids: {why}) cannot "
        f"be enforced here; {FIX}")
    assert "Traceback" not in proc.stderr
    assert sorted(p.relative_to(host) for p in host.rglob("*")) == before  # nothing made
    assert list(Path(os.environ["LAUNCHER_RUNS_DIR"]).iterdir()) == []  # no run folder


def test_the_profiles_limits_require_refuses_and_names_itself(tmp_path):
    prof = profile(tmp_path, "preq", "extends: base\nlimits: {pids: 40, require: true}\n")
    env = {"LAUNCHER_CGROUP_ROOT": str(tmp_path / "no-cgroups")}
    dry = launcher("run", "--runtime", "native", "-p", prof, "--dry-run", "--", "true", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "advisory here: pids (no cgroup controller found for pids)" in dry.stdout
    assert f"a real run refuses: limits.require ({prof}:2)" in dry.stdout
    proc = launcher("run", "--runtime", "native", "-p", prof, "--", sys.executable, "-c",
                    "print('ran')", env=env)
    assert proc.returncode == 1 and "ran" not in proc.stdout
    assert proc.stderr.splitlines()[-1] == (
        f"error: limits.require ({prof}:2): not started: the pids limit (no cgroup "
        f"controller found for pids) cannot be enforced here")


def test_the_shortfall_says_a_shared_fix_once():
    from launcher.cgroups.advisory import Advisory
    from launcher.runtime.engine import Enforcement

    a, b = Advisory("a", "fix: F"), Advisory("b", "fix: F")
    assert Enforcement({}, {"pids": a, "cpus": b}).shortfall() == (
        "the pids limit (a), the cpus limit (b) cannot be enforced here; fix: F")
    assert Enforcement({}, {"pids": a, "rdma": "none"}).shortfall() == (
        "the pids limit (a; fix: F), the rdma limit (none) cannot be enforced here")
    # words that hold "; " are no fix: only an Advisory's fix is said once
    assert Enforcement({}, {"pids": "a; b", "cpus": "a; b"}).shortfall() == (
        "the pids limit (a; b), the cpus limit (a; b) cannot be enforced here")


def test_the_engine_refuses_too_when_the_cgroup_falls_short(tmp_path):
    """--require-limits holds even where the preview and the real cgroup differ: the native
    engine refuses before it starts anything."""
    from launcher.errors import EngineError
    from launcher.runtime.native import NativeEngine
    from launcher.runtime.spec import Limits, RunSpec

    engine = NativeEngine(tmp_path / "no-cgroups")
    marker = tmp_path / "ran"
    spec = RunSpec(["touch", str(marker)], limits=Limits(pids=10),
                   required_by="--require-limits")
    with pytest.raises(EngineError, match=r"^--require-limits: not started: the pids limit "
                       r"\(no cgroup controller found for pids\) cannot be enforced here$"):
        engine.run(spec, lambda *_: None)
    assert not marker.exists()


# The real kernel: /sys/fs/cgroup/unified is a cgroup2 mount on this (hybrid) host


UNIFIED = Path("/sys/fs/cgroup/unified")
NOBODY = 65534
HELPER = r"""
import json, sys
from pathlib import Path
sys.stdin.readline()  # until the test has moved this process into its cgroup
from launcher.cgroups.placement import place
from launcher.cgroups.run_cgroup import make_placed
d = place(["hugetlb"], Path("/"))
made = [str(make_placed(p, sys.argv[1])) for p in d.placements]
print(json.dumps({"placements": [[str(p.parent), [[str(x), list(c)] for x, c in p.enable],
                                  str(p.leaf) if p.leaf else None] for p in d.placements],
                  "advisory": d.advisory, "made": made}), flush=True)
sys.stdin.readline()  # stays until the test has looked
"""


def _offers_hugetlb() -> bool:
    with contextlib.suppress(OSError):
        return "hugetlb" in (UNIFIED / "cgroup.controllers").read_text().split()
    return False


def kernel(test):  # type: ignore[no-untyped-def]
    """A test of the real kernel's tree: a cgroup2 mount at /sys/fs/cgroup/unified offering
    hugetlb is the host's (its kernel and mounts: a plain skip where it lacks one); root is
    conftest's `root` (failed in CI)."""
    needs_root = pytest.mark.usefixtures("root")(test)
    return pytest.mark.skipif(not _offers_hugetlb(), reason="needs a cgroup2 mount at "
                              "/sys/fs/cgroup/unified offering hugetlb")(needs_root)


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except FileNotFoundError:
        return []


def _join(cgroup: Path, pid: int) -> None:
    (cgroup / "cgroup.procs").write_text(str(pid))


def _enable(*dirs: Path) -> None:
    for d in dirs:
        (d / "cgroup.subtree_control").write_text("+hugetlb")


def _delegate(d: Path, uid: int) -> None:
    """As systemd delegates a subtree: the directory and the files that control it."""
    for p in (d, d / "cgroup.procs", d / "cgroup.subtree_control", d / "cgroup.threads"):
        os.chown(p, uid, uid)


class Tree:
    """A test cgroup under the v2 root, the processes put in it, all removed at the end."""

    def __init__(self) -> None:
        self.top = UNIFIED / f"launcher-test-{uuid.uuid4().hex[:8]}"
        self.procs: list[subprocess.Popen[str]] = []
        self.names: list[str] = []  # run cgroups a broken rule may put at the root
        self.top.mkdir()

    def sleeper(self, cgroup: Path) -> int:
        p = subprocess.Popen(["sleep", "300"], text=True)
        self.procs.append(p)
        _join(cgroup, p.pid)
        return p.pid

    def helper(self, cgroup: Path, name: str, uid: int = 0,
               script: str = HELPER) -> tuple[int, dict]:  # type: ignore[type-arg]
        """Run `script` (the rule, carried out) in a process that lives in `cgroup`."""
        if "/" not in name:
            self.names.append(name)
        # another user cannot always reach this interpreter (a venv under /root): the system's
        python = sys.executable if uid == 0 else shutil.which("python3", path="/usr/bin:/bin")
        need("a system python3 for a process of another user",
             None if python else "none in /usr/bin or /bin")
        p = subprocess.Popen([python, "-c", script, name], cwd="/", text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={"PYTHONPATH": str(ROOT)},
                             user=uid, group=uid, extra_groups=[])
        self.procs.append(p)
        _join(cgroup, p.pid)
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write("go\n")
        p.stdin.flush()
        line = p.stdout.readline()
        assert line, p.communicate(timeout=10)[1]
        return p.pid, json.loads(line)

    def remove(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
        for d in sorted((d for d in self.top.rglob("*") if d.is_dir()),
                        key=lambda d: len(d.parts), reverse=True) + [self.top] + [
                UNIFIED / n for n in self.names if (UNIFIED / n).is_dir()]:
            for pid in _words(d / "cgroup.procs"):  # only ours can be there
                with contextlib.suppress(OSError):
                    _join(UNIFIED, int(pid))
            with contextlib.suppress(OSError):
                d.rmdir()


def _disable_at_root() -> None:
    """As it was: a removed cgroup may take a moment to go (EBUSY meanwhile)."""
    def disabled() -> bool:
        try:
            (UNIFIED / "cgroup.subtree_control").write_text("-hugetlb")
            return True
        except OSError:
            return False

    try:
        wait_until(disabled, 5, what="hugetlb disabled at the cgroup2 root")
    except AssertionError as exc:
        warnings.warn(f"hugetlb left enabled at the cgroup2 root: {exc}", stacklevel=1)


@pytest.fixture
def tree() -> Iterator[Tree]:
    root_had = "hugetlb" in _words(UNIFIED / "cgroup.subtree_control")
    t = Tree()
    try:
        yield t
    finally:
        t.remove()
        if not root_had:
            _disable_at_root()
        assert not t.top.exists() and not any((UNIFIED / n).exists() for n in t.names)


@kernel
def test_kernel_enoent_then_ebusy_the_two_refusals_the_rule_avoids(tree):
    caller = tree.top / "caller"
    caller.mkdir()
    tree.sleeper(caller)
    with pytest.raises(OSError) as exc:  # the parent does not offer it
        _enable(caller)
    assert exc.value.errno == errno.ENOENT
    _enable(UNIFIED, tree.top)
    with pytest.raises(OSError) as exc:  # no internal processes
        _enable(caller)
    assert exc.value.errno == errno.EBUSY


@kernel
def test_kernel_beside_others_a_sibling_under_the_ancestor_enabled_top_down(tree):
    mid = tree.top / "mid"  # two levels to enable, whatever the root already gives
    caller = mid / "caller"
    caller.mkdir(parents=True)
    other = tree.sleeper(caller)
    root_had = "hugetlb" in _words(UNIFIED / "cgroup.subtree_control")
    _, out = tree.helper(caller, "launcher-1-sibling")
    run = mid / "launcher-1-sibling"
    enable = [[str(d), ["hugetlb"]] for d in ([] if root_had else [UNIFIED]) + [tree.top, mid]]
    assert out == {"placements": [[str(mid), enable, None]], "advisory": {},
                   "made": [str(run)]}
    assert "hugetlb" in _words(mid / "cgroup.subtree_control")
    assert list(run.glob("hugetlb.*.max"))  # the controller is there to set a limit
    _join(run, other)  # and a workload can live in it
    assert f"0::/{tree.top.name}/mid/launcher-1-sibling" in Path(
        f"/proc/{other}/cgroup").read_text()


@kernel
def test_kernel_delegated_and_alone_moves_into_a_leaf_then_enables(tree):
    caller = tree.top / "caller"
    caller.mkdir()
    _enable(UNIFIED, tree.top)  # what the delegating manager does
    _delegate(caller, NOBODY)
    pid, out = tree.helper(caller, "launcher-1-leaf", uid=NOBODY)
    run, leaf = caller / "launcher-1-leaf", caller / "launcher-leaf"
    assert out == {"placements": [[str(caller), [[str(caller), ["hugetlb"]]], str(leaf)]],
                   "advisory": {}, "made": [str(run)]}
    assert _words(caller / "cgroup.procs") == []
    assert _words(leaf / "cgroup.procs") == [str(pid)]
    assert "hugetlb" in _words(caller / "cgroup.subtree_control")
    assert run.stat().st_uid == NOBODY and list(run.glob("hugetlb.*.max"))


@kernel
def test_kernel_delegated_with_another_process_nothing_is_touched(tree):
    caller = tree.top / "caller"
    caller.mkdir()
    _enable(UNIFIED, tree.top)
    _delegate(caller, NOBODY)
    other = tree.sleeper(caller)
    _, out = tree.helper(caller, "launcher-1-none", uid=NOBODY)
    assert out["placements"] == [] and out["made"] == []
    assert out["advisory"] == {"hugetlb": (
        f"cgroup v2 hugetlb: {caller} holds other processes (PID {other}), and cannot write "
        f"{tree.top}; {FIX}")}
    assert [p.name for p in caller.iterdir() if p.is_dir()] == []
    assert _words(caller / "cgroup.subtree_control") == []


@kernel
def test_kernel_at_the_root_a_child_of_the_root(tree):
    if Path("/proc/self/cgroup").read_text().splitlines()[-1] != "0::/":
        pytest.skip("this process is not in the v2 root")
    d = place(["hugetlb"], Path("/"))
    assert [(p.parent, p.leaf) for p in d.placements] == [(UNIFIED, None)]
    run = make_placed(d.placements[0], f"launcher-test-{uuid.uuid4().hex[:8]}")
    try:
        assert list(run.glob("hugetlb.*.max"))
    finally:
        run.rmdir()


LEAVE = r"""
import json, os, sys
sys.stdin.readline()
from launcher.supervise.lifeline import leave_cgroups
leave_cgroups([sys.argv[1]])
print(json.dumps({"cgroup": open("/proc/self/cgroup").read().splitlines()[-1]}), flush=True)
sys.stdin.readline()
"""


@kernel
def test_kernel_a_supervisor_leaves_a_sibling_run_cgroup_and_removes_it(tree):
    """launcher killed: the supervisor moves out of a run cgroup whose parent may hold no
    process (it gives controllers to children) and removes it."""
    _enable(UNIFIED, tree.top)
    run = tree.top / "launcher-1-gone"
    run.mkdir()
    _, out = tree.helper(run, str(run), script=LEAVE)
    assert not run.exists()
    assert out == {"cgroup": "0::/"}  # the nearest cgroup that takes a process
