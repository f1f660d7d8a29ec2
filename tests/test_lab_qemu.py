"""The QEMU way of booting the cgroup v2 lab (tests/lab/qemu.py), without booting: the kernel it
picks, the initramfs it builds, the words a run says itself in. The boots themselves are in
tests/test_cgroup2_lab.py."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

from tests.conftest import need
from tests.lab import host, qemu


def test_the_newest_kernel_with_its_modules(tmp_path: Path) -> None:
    boot, mods = tmp_path / "boot", tmp_path / "modules"
    boot.mkdir()
    for rel in ("6.1.0-9-amd64", "6.1.0-56-amd64", "6.12.0-1-amd64"):
        (boot / f"vmlinuz-{rel}").write_bytes(b"k")
    for rel in ("6.1.0-9-amd64", "6.1.0-56-amd64"):  # 6.12 without modules: not bootable here
        (mods / rel).mkdir(parents=True)
    assert qemu.find_kernel(boot, mods) == qemu.Kernel("6.1.0-56-amd64",
                                                       boot / "vmlinuz-6.1.0-56-amd64")
    assert qemu.find_kernel(tmp_path / "none", mods) is None


def test_the_initramfs_holds_busybox_the_9p_modules_and_an_init(tmp_path: Path) -> None:
    kernel = qemu.find_kernel()
    need("QEMU and a kernel for the lab (scripts/test.sh installs them)",
         f"{qemu.missing() or 'no kernel in /boot'}" if kernel is None or qemu.missing()
         else None)
    assert kernel is not None
    initrd = qemu.build_initramfs(kernel.release, "/tmp/lab/init.sh", tmp_path / "initrd.gz")
    listing = subprocess.run(["cpio", "-t", "--quiet"], input=gzip.decompress(
        initrd.read_bytes()), capture_output=True, check=True).stdout.decode().split()
    loaded = [Path(p).name for p in qemu.module_files(kernel.release)]
    assert {"init", "bin/busybox"} <= set(listing)
    assert sorted(n for n in listing if n.startswith("modules/")) == \
        sorted(f"modules/{n.split('.ko')[0]}.ko" for n in loaded)
    assert initrd.stat().st_size < 4 << 20
    assert not (tmp_path / "initrd.d").exists()  # the tree is gone, the archive stays


def test_a_run_says_its_kernel_and_how_it_booted() -> None:
    meta = {"kernel": "6.1.0-56-amd64", "way": str(host.Way("qemu")), "cpus": 1,
            "boots": [{}, {}]}
    assert host.describe(meta) == ("cgroup v2 lab: Linux 6.1.0-56-amd64 under QEMU (TCG), "
                                   "2 kernels at once, 1 CPU each")
    meta = {"kernel": "6.1.0-56-amd64", "way": str(host.Way("qemu", kvm=True)), "cpus": 2}
    assert host.describe(meta) == "cgroup v2 lab: Linux 6.1.0-56-amd64 under QEMU (KVM), 2 CPUs"
    assert str(host.Way("uml")) == "user-mode Linux"
