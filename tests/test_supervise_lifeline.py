"""launcher/supervise/lifeline.py, unit by unit: the subreaper, the signals and the stop of
the whole tree (real children, their grace, their reaping), launcher's words and its end on a
pipe or a named FIFO, and the supervisor's own moves (enter, leave_v1_memory, join,
leave_cgroups) into a fake cgroup tree under tmp_path, since each takes its directories as
paths. Whatever signals or reaps "every descendant" runs in a Python process of its own, so
that no other test's children are touched."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from typing import Any

from launcher import contract as c
from launcher.cpulist import MAX_CPUS
from launcher.supervise import lifeline
from tests.conftest import ROOT, need

PY = sys.executable
# the top of every helper script: the module under test, and a poll (no fixed sleeps)
HEAD = """\
import json, os, signal, subprocess, sys, time
from launcher.proctree import descendants
from launcher.supervise import lifeline
from tests.polling import wait_until

def gone(pid):
    '''Reaped (not ours to wait for any more).'''
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False
"""


def run_py(code: str, *args: str, before: tuple[str, ...] = (), timeout: float = 60) -> Any:
    """`code` (after HEAD) in a Python process of its own, importing this tree; what it
    printed last, read as JSON."""
    script = HEAD + textwrap.dedent(code)
    proc = subprocess.run([*before, PY, "-c", script, *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


# --- the subreaper and the tree ---------------------------------------------------------


def test_a_subreaper_gets_the_orphans_of_its_tree():
    got = run_py("""
        lifeline.become_subreaper()
        sh = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!"], stdout=subprocess.PIPE)
        orphan = int(sh.stdout.readline())
        sh.wait()  # its child is an orphan now: ours, not init's
        with open(f"/proc/{orphan}/stat") as f:
            ppid = int(f.read().rpartition(")")[2].split()[1])
        os.kill(orphan, signal.SIGKILL)
        try:
            os.waitpid(orphan, 0)
            reaped = True
        except ChildProcessError:
            reaped = False
        print(json.dumps({"ppid": ppid, "me": os.getpid(), "reaped": reaped}))
    """)
    assert got["ppid"] == got["me"] and got["reaped"]


def test_signal_tree_signals_every_descendant_and_names_them():
    got = run_py("""
        kids = [subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(2)]
        sh = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
        before = wait_until(lambda: (lambda d: d if len(d) == 4 else None)(
            descendants(os.getpid())), what="the tree")
        signalled = lifeline.signal_tree(signal.SIGUSR1)
        grandchild = (set(before) - {k.pid for k in kids} - {sh.pid}).pop()
        ends = [os.waitpid(p.pid, 0)[1] for p in (*kids, sh)]
        wait_until(lambda: not os.path.exists(f"/proc/{grandchild}/stat") or
                   open(f"/proc/{grandchild}/stat").read().rpartition(")")[2].split()[0]
                   in ("Z", "X"), what="the grandchild's end")
        print(json.dumps({"before": sorted(before), "signalled": sorted(signalled),
                          "signals": [os.WTERMSIG(s) for s in ends]}))
    """)
    assert got["signalled"] == got["before"]
    assert got["signals"] == [10, 10, 10]  # SIGUSR1, to each


def test_stop_tree_reaps_children_that_end_at_sigterm_without_waiting_out_the_grace():
    got = run_py("""
        kids = [subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(3)]
        wait_until(lambda: len(descendants(os.getpid())) == 3, what="the children")
        t = time.monotonic()
        lifeline.stop_tree(grace=30.0, reap=True)
        took = time.monotonic() - t
        print(json.dumps({"took": took, "left": descendants(os.getpid()),
                          "reaped": [gone(k.pid) for k in kids]}))
    """)
    assert got["left"] == [] and got["reaped"] == [True, True, True]
    assert got["took"] < 20  # not the grace: each was reaped as it ended (in its own group)


def test_stop_tree_kills_what_ignores_sigterm_after_the_grace_and_reaps_it():
    got = run_py("""
        k = subprocess.Popen(["sh", "-c", "trap '' TERM; echo ready; exec sleep 30"],
                             stdout=subprocess.PIPE, start_new_session=True)
        k.stdout.readline()  # SIGTERM is ignored from here on
        cpu, t = time.process_time(), time.monotonic()
        lifeline.stop_tree(grace=2.0, reap=True)
        took, cpu = time.monotonic() - t, time.process_time() - cpu
        print(json.dumps({"took": took, "cpu": cpu, "left": descendants(os.getpid()),
                          "reaped": gone(k.pid)}))
    """)
    assert got["left"] == [] and got["reaped"]
    assert 2.0 <= got["took"] < 3.9  # the grace, then SIGKILL and a prompt reap
    assert got["cpu"] < 0.25  # it polls the tree, it does not spin on it


def test_stop_tree_leaves_the_reaping_to_the_caller_by_default():
    got = run_py("""
        k = subprocess.Popen(["sleep", "30"], start_new_session=True)
        wait_until(lambda: descendants(os.getpid()) == [k.pid], what="the child")
        lifeline.stop_tree(grace=0.5)
        pid, status = os.waitpid(k.pid, os.WNOHANG)  # the zombie is still ours to reap
        print(json.dumps({"pid": pid == k.pid, "signal": os.WTERMSIG(status)}))
    """)
    assert got == {"pid": True, "signal": 15}


def test_reap_collects_every_exited_child_and_returns_the_status_asked_for():
    got = run_py("""
        a = subprocess.Popen(["sh", "-c", "exit 3"])
        b = subprocess.Popen(["sh", "-c", "exit 5"])
        def zombie(p):
            with open(f"/proc/{p}/stat") as f:
                return f.read().rpartition(")")[2].split()[0] == "Z"
        wait_until(lambda: zombie(a.pid) and zombie(b.pid), what="both ended")
        status = lifeline._reap(b.pid)
        print(json.dumps({"b": os.WEXITSTATUS(status), "a_reaped": gone(a.pid),
                          "none": lifeline._reap()}))
    """)
    assert got == {"b": 5, "a_reaped": True, "none": None}


# --- launcher's words and its end ----------------------------------------------------------


def test_launchers_words_on_a_pipe_are_read_when_it_polls_readable():
    r, w = os.pipe()
    os.set_inheritable(r, True)
    heard: list[str] = []
    gone: list[bool] = []
    line = lifeline.Lifeline(r, lambda: gone.append(True), heard.append)
    try:
        assert not os.get_inheritable(r)  # the workload never gets it
        assert line.fifo is False  # an anonymous pipe polls as hung up: no read each turn
        assert line.readable() == [r] and line.writable() == []
        os.write(w, b"closed stdout\n")
        line.ready([], [])  # not readable this turn: left unread
        assert heard == []
        line.ready([r], [])
        assert heard == ["stdout"]
        os.write(w, b"closed std")
        line.ready([r], [])
        os.write(w, b"err\nclosed stdin\nclosed stdout")
        line.ready([r], [])
        assert heard == ["stdout", "stderr"]  # split over reads; no other word; no end yet
        assert gone == [] and line.readable() == [r]
    finally:
        os.close(r)
        os.close(w)


def test_launcher_gone_stops_and_reaps_the_tree_then_says_so_once():
    got = run_py("""
        kid = subprocess.Popen(["sleep", "30"], start_new_session=True)
        wait_until(lambda: descendants(os.getpid()) == [kid.pid], what="the child")
        r, w = os.pipe()
        said = []  # the tree as on_gone finds it
        line = lifeline.Lifeline(r, lambda: said.append(len(descendants(os.getpid()))),
                                 lambda s: None)
        os.close(w)  # launcher's end: gone
        t = time.monotonic()
        line.ready([r], [])
        print(json.dumps({"said": said, "readable": line.readable(), "reaped": gone(kid.pid),
                          "took": time.monotonic() - t}))
    """)
    assert got["said"] == [0] and got["reaped"]  # stopped and reaped before on_gone
    assert got["readable"] == []  # never polled again
    assert got["took"] < 2.5  # sleep ends at SIGTERM: no grace waited out


def test_a_named_fifo_is_read_each_turn_and_its_end_said_once(tmp_path):
    fifo = tmp_path / "lifeline"
    os.mkfifo(fifo)
    got = run_py("""
        held = os.open(sys.argv[1], os.O_RDWR)  # launcher's end, opened first
        ours = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
        heard, gone_ = [], []
        line = lifeline.Lifeline(ours, lambda: gone_.append(True), heard.append)
        line.ready([], [])  # nothing there: no end
        quiet = list(gone_)
        os.write(held, b"closed stderr\\n")
        line.ready([], [])  # never polls readable: read all the same
        os.close(held)
        line.ready([], [])
        line.ready([], [])  # once gone, not read again
        print(json.dumps({"fifo": line.fifo, "quiet": quiet, "heard": heard, "gone": gone_,
                          "readable": line.readable()}))
    """, str(fifo))
    assert got == {"fifo": True, "quiet": [], "heard": ["stderr"], "gone": [True],
                   "readable": []}


def test_only_a_descriptor_above_2_is_kept_from_the_workload_or_read_as_a_fifo(tmp_path):
    fifo = tmp_path / "lifeline"
    os.mkfifo(fifo)
    got = run_py("""
        os.open(sys.argv[1], os.O_RDWR)
        ours = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
        err = os.dup(2)
        out = {}
        for fd in (3, 2):
            os.dup2(ours, fd)  # inheritable, as dup2 makes it
            line = lifeline.Lifeline(fd, lambda: None, lambda s: None)
            out[fd] = [line.fifo, os.get_inheritable(fd)]
        os.dup2(err, 2)
        print(json.dumps(out))
    """, str(fifo))
    assert got == {"3": [True, False], "2": [False, True]}


def test_a_read_takes_at_most_4096_bytes_and_tells_nothing_yet_from_the_end(tmp_path):
    r, w = os.pipe()
    try:
        os.write(w, b"x" * 5000)
        assert lifeline._read(r) == b"x" * 4096
        assert lifeline._read(r) == b"x" * 904
        os.set_blocking(r, False)
        assert lifeline._read(r) == b""  # nothing now: not the end
        os.close(w)
        assert lifeline._read(r) is None  # the end
        assert lifeline._named(r) is False
    finally:
        os.close(r)
    assert lifeline._read(r) is None  # unreadable: launcher is gone
    assert lifeline._named(r) is False  # closed: no name to read
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR)
    try:
        assert lifeline._named(fd) is True
    finally:
        os.close(fd)


# --- the supervisor's own moves -----------------------------------------------------------


def test_enter_joins_each_cgroup_and_says_the_first_it_cannot(tmp_path):
    one, two, three = (tmp_path / n for n in ("one", "two", "three"))
    for d in (one, two, three):
        d.mkdir()
    assert lifeline.enter({}, [str(one), str(two)]) is None
    assert (one / "cgroup.procs").read_text() == str(os.getpid())
    assert (two / "cgroup.procs").read_text() == str(os.getpid())
    missing = tmp_path / "no" / "such"
    said = lifeline.enter({}, [str(missing), str(three)])
    assert said == f"cannot join the run's cgroup {missing}: No such file or directory"
    assert not (three / "cgroup.procs").exists()  # it stopped at the first


def test_enter_says_which_cpus_or_limit_it_cannot_take():
    got = run_py("""
        from launcher.supervise.lifeline import enter
        soft, hard = [int(x) for x in sys.argv[1:3]]
        print(json.dumps([
            enter({"LAUNCHER_CPUSET": "x"}, []),
            enter({"LAUNCHER_CPUSET": sys.argv[3]}, []),
            enter({"LAUNCHER_RLIMITS": f"nofile={soft}:{hard + 1}"}, []),
        ]))
    """, *map(str, resource.getrlimit(resource.RLIMIT_NOFILE)), str(MAX_CPUS - 1))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert got[0] == "cannot run on CPUs x: invalid literal for int() with base 10: 'x'"
    assert got[1] == f"cannot run on CPUs {MAX_CPUS - 1}: Invalid argument"
    if hard != resource.RLIM_INFINITY:  # a hard limit above its own: not without
        # CAP_SYS_RESOURCE, which this host's root lacks
        assert got[2] == (f"cannot set the nofile limit to {soft}/{hard + 1}: not allowed to "
                          f"raise maximum limit")


def test_enter_takes_the_runs_cpus_and_rlimits(root):
    """In a PID namespace of its own, as its PID 2: its CPUs and limits are its own to set,
    and no other process's (PID 1 is the namespace's init, here)."""
    need("unshare (util-linux)", None if shutil.which("unshare") else "not on PATH")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    got = run_py(f"""
        import resource
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            cpu = min(os.sched_getaffinity(0))
            env = {{"{c.CPUSET}": str(cpu), "{c.RLIMITS}": "bogus=1:1,core=0:0,fsize=-1:-1,"
                   "nofile={min(soft, 100)}:{min(hard, 200)}"}}
            said = lifeline.enter(env, [])
            os.write(w, json.dumps({{
                "said": said, "cpus": sorted(os.sched_getaffinity(0)), "cpu": cpu,
                "core": resource.getrlimit(resource.RLIMIT_CORE),
                "fsize": resource.getrlimit(resource.RLIMIT_FSIZE),
                "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
                "none": lifeline.enter({{}}, [])}}).encode())
            os._exit(0)
        os.close(w)
        data = os.read(r, 65536)
        os.waitpid(pid, 0)
        print(data.decode())
    """, before=("unshare", "--pid", "--fork"))
    assert got["said"] is None and got["none"] is None
    assert got["cpus"] == [got["cpu"]]
    assert got["core"] == [0, 0]  # 0 is a limit, not "unlimited"
    assert got["fsize"] == [resource.RLIM_INFINITY] * 2  # -1: unlimited
    assert got["nofile"] == [min(soft, 100), min(hard, 200)]  # after a name it does not know


def test_leave_v1_memory_moves_out_of_v1_memory_cgroups_only_and_join_moves_back(tmp_path):
    me = str(os.getpid())
    run = tmp_path / "caller" / "run"
    v2 = tmp_path / "v2" / "run"
    stuck = tmp_path / "stuck" / "run"
    for d in (run, v2, stuck):
        d.mkdir(parents=True)
    for d in (run, stuck):
        (d / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (stuck.parent / "cgroup.procs").mkdir()  # a parent that will not take it
    left = lifeline.leave_v1_memory([str(run), str(v2), str(stuck)])
    assert left == [str(run)]
    assert (run.parent / "cgroup.procs").read_text() == me
    assert not (v2.parent / "cgroup.procs").exists()  # cgroup v2: left alone
    lifeline.join([str(tmp_path / "gone"), *left])  # one it cannot join: passed over
    assert (run / "cgroup.procs").read_text() == me


# the homes of leave_cgroups, each case a fake tree: (directories, files, where it lands)
CASES = """\
import resource
resource.setrlimit(resource.RLIMIT_AS, (64 << 20, 64 << 20))  # a runaway climb: MemoryError
root = sys.argv[1]
def tree(dirs, files):
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for f in files:
        open(os.path.join(root, f), "w").close()
def procs(where):
    path = os.path.join(root, where, "cgroup.procs")
    return open(path).read() if os.path.isfile(path) else None
"""


def test_leave_cgroups_moves_into_the_parent_or_its_leaf_or_an_ancestor_and_removes(tmp_path):
    got = run_py(CASES + textwrap.dedent("""
        out = {}
        # the parent takes it (its leaf is not tried)
        tree(["a/p/run", "a/p/launcher-leaf"], [])
        lifeline.leave_cgroups([os.path.join(root, "a/p/run")])
        out["parent"] = [procs("a/p"), procs("a/p/launcher-leaf"),
                         os.path.exists(os.path.join(root, "a/p/run"))]
        # a v2 parent holding its children's controllers: launcher's leaf beside the run
        tree(["b/p/run", "b/p/launcher-leaf", "b/p/cgroup.procs"], [])
        lifeline.leave_cgroups([os.path.join(root, "b/p/run")])
        out["leaf"] = [procs("b/p/launcher-leaf"), os.path.exists(os.path.join(root, "b/p/run"))]
        # neither: the nearest ancestor that is a cgroup
        tree(["c/g/p/run", "c/g/p/cgroup.procs"], ["c/g/cgroup.procs", "c/cgroup.procs"])
        lifeline.leave_cgroups([os.path.join(root, "c/g/p/run")])
        out["ancestor"] = [procs("c/g"), procs("c")]
        # an ancestor that is no cgroup ends the climb
        tree(["d/a/p/run", "d/a/p/cgroup.procs"], ["d/cgroup.procs"])
        lifeline.leave_cgroups([os.path.join(root, "d/a/p/run")])
        out["gap"] = [procs("d/a"), procs("d"), os.path.exists(os.path.join(root, "d/a/p/run"))]
        print(json.dumps(out))
    """), str(tmp_path))
    parent, leaf, ancestor, gap = got["parent"], got["leaf"], got["ancestor"], got["gap"]
    me = parent[0]
    assert me and me.isdigit()
    assert parent[1:] == [None, False]  # the leaf left alone; the run's cgroup removed
    assert leaf == [me, False]
    assert ancestor == [me, ""]  # the nearest one
    assert gap == [None, "", False]  # nowhere to go, and still removed


def test_leave_cgroups_gives_up_on_a_cgroup_that_stays_busy(tmp_path):
    got = run_py(CASES + textwrap.dedent("""
        tree(["p/run"], ["p/run/busy"])  # rmdir: not empty, as a cgroup a task still holds
        t = time.monotonic()
        lifeline.leave_cgroups([os.path.join(root, "p/run")])
        print(json.dumps({"took": time.monotonic() - t, "procs": procs("p"),
                          "left": os.path.exists(os.path.join(root, "p/run"))}))
    """), str(tmp_path))
    assert got["procs"] and got["left"]
    assert 2.4 <= got["took"] < 20  # tried again every 0.05 s, 50 times
