"""A user who runs rootless Podman, as one on a shared machine does: a login of its own with
/etc/subuid and /etc/subgid ranges (newuidmap maps them), Podman's configuration in its home,
and the base image in its own image store (copied from root's: no registry is reachable here).
Made once per machine by root and kept; `Caller.command` runs a command as that user.

Its Podman stores images with native overlay (the kernel mounts it in a user namespace since
5.13; Podman 4.3 would pick vfs, which copies the whole image for each container) and starts
containers without a network where /dev/net/tun is closed to users (rootless networking,
slirp4netns, opens it: "open("/dev/net/tun"): Permission denied")."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

USER = "launcher-rootless"
TUN = Path("/dev/net/tun")
NEEDS = ("setpriv", "useradd", "usermod", "newuidmap", "newgidmap", "podman")


@dataclass(frozen=True)
class Caller:
    """Who runs launcher in a test: a user of this machine, by its IDs."""

    uid: int
    gid: int
    home: Path
    python: str  # an interpreter this user may run launcher with
    pythonpath: str

    def command(self, *argv: str) -> list[str]:
        """`argv` as this user (its supplementary groups included)."""
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups",
                *argv]

    def env(self, work: Path) -> dict[str, str]:
        """Its environment: its home (Podman's configuration and image store), launcher
        importable, runs under `work`."""
        return {"PATH": os.environ["PATH"], "HOME": str(self.home), "USER": USER,
                "PYTHONPATH": self.pythonpath, "LAUNCHER_RUNS_DIR": str(work / ".runs"),
                "LAUNCHER_PROFILE_PATH": ""}

    def launcher(self, *args: str) -> list[str]:
        return self.command(self.python, "-m", "launcher", *args)

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*argv), env=self.env(self.home), cwd=self.home,
                              capture_output=True, text=True, timeout=timeout)


def missing() -> str | None:
    """Why no rootless caller can be made here, or None."""
    if os.getuid() != 0:
        return "making a user with subordinate IDs needs root"
    lacking = [x for x in NEEDS if shutil.which(x) is None]
    return f"{', '.join(lacking)} not installed (apt-get install podman uidmap)" \
        if lacking else None


def python_for(uid: int, gid: int) -> tuple[str, str] | None:
    """An interpreter of this Python's version, and the PYTHONPATH, with which `uid` can run
    launcher (ours may lie in a folder only root may enter, as /root/.pyenv), or None."""
    paths = os.pathsep.join(dict.fromkeys(
        [str(ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        probe = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "env",
             f"PYTHONPATH={paths}", python, "-c",
             f"import sys, launcher.cli.main; sys.exit(sys.version_info[:2] != "
             f"{tuple(sys.version_info[:2])})"], capture_output=True, cwd="/")
        if probe.returncode == 0:
            return python, paths
    return None


def rootless_caller(image: str) -> Caller | str:
    """The rootless Podman user, made where it is not, `image` in its store; else why not."""
    why = missing()
    if why:
        return why
    user = _user()
    _subordinate_ids(USER)
    found = python_for(user.pw_uid, user.pw_gid)
    if found is None:
        return f"no Python {sys.version_info[0]}.{sys.version_info[1]} that {USER} may run " \
               f"launcher with"
    caller = Caller(user.pw_uid, user.pw_gid, Path(user.pw_dir), *found)
    _configure(caller)
    return _copy_image(caller, image) or caller


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", USER],
                       check=True, capture_output=True)
        return pwd.getpwnam(USER)


def _subordinate_ids(name: str) -> None:
    """65536 subordinate UIDs and GIDs past every range given (useradd gives them where
    login.defs says so; not every system's does)."""
    for kind in ("uid", "gid"):
        lines = _read(Path(f"/etc/sub{kind}")).splitlines()
        if any(x.split(":")[0] == name for x in lines):
            continue
        ends = [int(f[1]) + int(f[2]) for x in lines if len(f := x.split(":")) == 3]
        start = max([100000, *ends])
        subprocess.run(["usermod", f"--add-sub{kind}s", f"{start}-{start + 65535}", name],
                       check=True, capture_output=True)


def _configure(caller: Caller) -> None:
    """Podman's storage (native overlay) and, where /dev/net/tun is closed, no network."""
    conf = caller.home / ".config" / "containers"
    files = {"storage.conf": '[storage]\ndriver = "overlay"\n',
             "containers.conf": '[containers]\nnetns = "none"\n' if _tun_closed() else ""}
    for name, text in files.items():
        path = conf / name
        if _read(path) != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for d in (caller.home / ".config", conf, *conf.iterdir()):
        os.chown(d, caller.uid, caller.gid)


def _tun_closed() -> bool:
    try:
        mode = TUN.stat().st_mode
    except OSError:
        return True
    return not stat.S_ISCHR(mode) or mode & 0o006 != 0o006


def _copy_image(caller: Caller, image: str) -> str | None:
    """`image` from root's Podman store into the user's, where its ID differs (a docker
    archive keeps the ID); why not, or None."""
    def image_id(out: subprocess.CompletedProcess[str]) -> str:
        return out.stdout.strip() if out.returncode == 0 else ""

    inspect = ("podman", "image", "inspect", "--format", "{{.Id}}", image)
    ours = image_id(subprocess.run(inspect, capture_output=True, text=True, timeout=120))
    if not ours:
        return f"root's Podman has no image {image} (scripts/test.sh copies it from Docker's)"
    if image_id(caller.run(*inspect)) == ours:
        return None
    with tempfile.TemporaryDirectory(prefix="launcher-rootless-") as tmp:
        os.chmod(tmp, 0o755)
        archive = f"{tmp}/image.tar"
        saved = subprocess.run(["podman", "save", "--format", "docker-archive", "-o", archive,
                                image], capture_output=True, text=True, timeout=600)
        if saved.returncode != 0:
            return f"podman save {image}: {saved.stderr.strip()}"
        os.chmod(archive, 0o644)
        loaded = caller.run("podman", "load", "-q", "-i", archive, timeout=600)
    if loaded.returncode != 0:
        return f"{USER} cannot load {image}: {loaded.stderr.strip()}"
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
