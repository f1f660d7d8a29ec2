"""The lab's second way to boot a pure cgroup v2 kernel, where user-mode Linux is refused or
missing (FIELD.md 47-48): Debian's own kernel under QEMU (KVM where /dev/kvm works, else TCG),
the host's / as the guest's root, read-only over 9p, and the lab's work folder as a second,
writable 9p share at the same path. A small initramfs (built into the work folder, never into
/boot) loads the 9p modules, mounts the root and hands over to the lab's init script."""

from __future__ import annotations

import ctypes
import fcntl
import gzip
import lzma
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

QEMU = "qemu-system-x86_64"
BUSYBOX = "/bin/busybox"  # Debian's busybox-static
MODULES = ("virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev",
           "virtio_pci", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p")
ROOT_TAG, WORK_TAG = "fsroot", "labwork"
NINEP = "trans=virtio,version=9p2000.L,msize=262144"
CPUS, MEM = 2, "1536M"
KVM_GET_API_VERSION, KVM_CREATE_VM = 0xAE00, 0xAE01
KVM_UP = "LAB-KVM-UP"
PR_SET_PDEATHSIG = 1

# PID 1 of the initramfs: the 9p modules, the host's / read-only, then the lab's init
INITRAMFS_INIT = """#!/bin/busybox sh
bb=/bin/busybox
for m in {modules}; do $bb insmod "/modules/$m" || echo "LAB initramfs: insmod $m failed"; done
$bb mkdir -p /newroot
if ! $bb mount -t 9p -o {ninep},ro,cache=loose {root_tag} /newroot; then
  echo "LAB initramfs: cannot mount the host's root over 9p"
  $bb poweroff -f
fi
exec $bb switch_root /newroot {init}
"""

# what the lab's init needs first on a read-only root: /dev; a /tmp that shows the host's (a
# --src or a python there, as UML's hostfs does) and takes writes into the guest's memory (an
# overlay, the modules from the host's /lib/modules; a bare tmpfs where that fails); the
# writable work folder at its host path
PRELUDE = """mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /var/tmp
mkdir /var/tmp/.up /var/tmp/.work
modprobe overlay 2>/dev/null
mount -t overlay overlay -o lowerdir=/tmp,upperdir=/var/tmp/.up,workdir=/var/tmp/.work /tmp \\
  || mount -t tmpfs tmpfs /tmp
mkdir -p {work}
mount -t 9p -o {ninep} {work_tag} {work}
"""


class QemuUnavailable(RuntimeError):
    """QEMU, a kernel for it, or busybox-static is missing."""


@dataclass(frozen=True)
class Kernel:
    release: str  # 6.1.0-56-amd64
    image: Path  # /boot/vmlinuz-6.1.0-56-amd64


def _version_key(release: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", release)]


def find_kernel(boot: Path = Path("/boot"), modules: Path = Path("/lib/modules")) -> Kernel | None:
    """The newest readable /boot/vmlinuz-R that has /lib/modules/R (Debian's
    linux-image-amd64)."""
    found = [Kernel(p.name.removeprefix("vmlinuz-"), p) for p in boot.glob("vmlinuz-*")
             if (modules / p.name.removeprefix("vmlinuz-")).is_dir() and os.access(p, os.R_OK)]
    return max(found, key=lambda k: _version_key(k.release), default=None)


def missing() -> str | None:
    """What this way lacks on this machine, in words; None when it can boot."""
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (Debian's qemu-system-x86)"
    if find_kernel() is None:
        return "no kernel with modules in /boot (Debian's linux-image-amd64)"
    if not os.access(BUSYBOX, os.X_OK) or not _static(Path(BUSYBOX)):
        return f"{BUSYBOX} is not a static busybox (Debian's busybox-static)"
    if shutil.which("cpio") is None:
        return "cpio is not installed"
    return None


def _static(elf: Path) -> bool:
    """No program interpreter: an initramfs has no loader to run it with."""
    return b"/ld-linux" not in elf.read_bytes()[:4096]


def kvm_works(dev: str = "/dev/kvm") -> bool:
    """/dev/kvm opens and makes a VM (it may exist and still refuse, as in a nested guest)."""
    try:
        fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if fcntl.ioctl(fd, KVM_GET_API_VERSION) != 12:
            return False
        os.close(fcntl.ioctl(fd, KVM_CREATE_VM, 0))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def module_files(release: str) -> list[Path]:
    """The 9p modules' files in load order; those built into the kernel have none."""
    out: list[Path] = []
    for name in MODULES:
        done = subprocess.run(["modinfo", "-n", "-k", release, name], capture_output=True,
                              text=True, check=False)
        path = done.stdout.strip()
        if done.returncode != 0 or not path:
            raise QemuUnavailable(f"kernel {release} has no module {name}: "
                                  f"{done.stderr.strip()}")
        if path != "(builtin)":
            out.append(Path(path))
    return out


def _module_bytes(path: Path) -> bytes:
    """A module as busybox's insmod loads it: uncompressed."""
    data = path.read_bytes()
    if path.suffix == ".xz":
        return lzma.decompress(data)
    if path.suffix == ".gz":
        return gzip.decompress(data)
    if path.suffix == ".zst":
        return subprocess.run(["zstd", "-dc", str(path)], capture_output=True,
                              check=True).stdout
    return data


def build_initramfs(release: str, init: str, dest: Path) -> Path:
    """A gzipped newc cpio at `dest` holding busybox, the 9p modules and an /init that
    switch_roots into `init` (a path on the host's root)."""
    tree = dest.with_suffix(".d")
    (tree / "bin").mkdir(parents=True)
    (tree / "modules").mkdir()
    shutil.copy2(BUSYBOX, tree / "bin" / "busybox")
    names = []
    for path in module_files(release):
        name = path.name.split(".ko")[0] + ".ko"
        (tree / "modules" / name).write_bytes(_module_bytes(path))
        names.append(name)
    (tree / "init").write_text(INITRAMFS_INIT.format(
        modules=" ".join(names), ninep=NINEP, root_tag=ROOT_TAG, init=shlex.quote(init)))
    (tree / "init").chmod(0o755)
    return _pack(tree, dest)


def _pack(tree: Path, dest: Path) -> Path:
    """`tree` as a gzipped newc cpio at `dest`, owned by root; the tree is removed."""
    files = "\n".join(["."] + sorted(str(p.relative_to(tree)) for p in tree.rglob("*")))
    archive = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0"], cwd=tree,
                             input=files.encode(), capture_output=True, check=True).stdout
    dest.write_bytes(gzip.compress(archive, compresslevel=6))
    shutil.rmtree(tree)
    return dest


def kvm_boots(timeout: float = 10) -> bool:
    """Whether a kernel boots under KVM here: /dev/kvm may open, make a VM and still hang the
    guest (seen in a nested VM of this kind: no console line after the decompressor). One
    boot of an initramfs that only says so; about a second where KVM works."""
    kernel = find_kernel()
    if kernel is None or not kvm_works():
        return False
    work = Path(tempfile.mkdtemp(prefix="cgroup2-kvm-", dir="/tmp"))
    try:
        tree = work / "initrd.d"
        (tree / "bin").mkdir(parents=True)
        shutil.copy2(BUSYBOX, tree / "bin" / "busybox")
        (tree / "init").write_text(f"#!/bin/busybox sh\necho {KVM_UP}\n"
                                   "/bin/busybox poweroff -f\n")
        (tree / "init").chmod(0o755)
        initrd = _pack(tree, work / "initrd.gz")
        cmd = [QEMU, "-machine", "q35,accel=kvm", "-cpu", "host", "-m", "256M", "-nographic",
               "-no-reboot", "-nic", "none", "-kernel", str(kernel.image), "-initrd",
               str(initrd), "-append", "console=ttyS0 quiet loglevel=3 panic=-1"]
        return KVM_UP in run_console(cmd, timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def die_with_parent() -> None:
    """prctl(PR_SET_PDEATHSIG, SIGKILL), for a child before exec: it dies with the thread that
    started it, whatever kills that (SIGKILL, SIGTERM without a handler, a crash)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def run_console(cmd: list[str], timeout: float) -> str:
    """Run a VM to its end or `timeout`, its console as text; the VM never outlives this."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=die_with_parent)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = b""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            out = (out or b"") + proc.communicate()[0]
    return out.decode(errors="replace")


def prelude(work: Path) -> str:
    """The lines the lab's init runs first under QEMU (none under UML: hostfs is writable)."""
    return PRELUDE.format(work=shlex.quote(str(work)), ninep=NINEP, work_tag=WORK_TAG)


def argv(kernel: Kernel, initrd: Path, work: Path, *, kvm: bool, cpus: int = CPUS,
         mem: str = MEM) -> list[str]:
    """One QEMU boot: serial console on stdout, no network, power off ends it."""
    accel = ["-machine", "q35,accel=kvm", "-cpu", "host"] if kvm else \
        ["-machine", "q35,accel=tcg", "-cpu", "max"]
    return [QEMU, *accel, "-smp", str(cpus), "-m", mem, "-nographic", "-no-reboot",
            "-nic", "none", "-kernel", str(kernel.image), "-initrd", str(initrd),
            "-append", "console=ttyS0 quiet loglevel=3 panic=-1",
            "-virtfs", f"local,path=/,mount_tag={ROOT_TAG},security_model=none,readonly=on,"
                       "multidevs=remap",
            "-virtfs", f"local,path={work},mount_tag={WORK_TAG},security_model=none,"
                       "multidevs=remap"]
