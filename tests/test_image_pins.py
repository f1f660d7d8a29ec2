"""Images the thread model knows (issue 15): each vendor's base image has a Python that the
pinned frameworks support, and every pin names a version a thread model was measured on; the
pins are resolved for the image's Python against the package index, as pip in the build will."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from launcher.frameworks import get, names
from launcher.render.dockerfile import framework_requirements
from launcher.vendors import get as get_vendor

VENDORS = ("nvidia", "none")  # AMD's ROCm builds come from AMD's and PyTorch's own indexes


def _pins(vendor: str) -> dict[str, tuple[str, str]]:
    """requirement name -> (framework, pinned version); index options left out."""
    out = {}
    for fw in names():
        for line in framework_requirements(fw, vendor):
            if line.startswith("--") or "==" not in line:
                continue
            name, _, version = line.partition("==")
            out[name.split("[")[0]] = (fw, version)
    return out


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_pin_is_a_version_the_model_was_measured_on(vendor):
    pins = _pins(vendor)
    assert pins, vendor
    for name, (fw, version) in pins.items():
        assert any(m.covers(version) for m in get(fw).models), (vendor, name, version)


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_pins_resolve_for_the_base_images_python(vendor, tmp_path):
    pins = _pins(vendor)
    reqs = [line for fw in names() for line in framework_requirements(fw, vendor)
            if not line.startswith("--") and "==" in line]
    python = get_vendor(vendor).python
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--no-deps",
         "--ignore-installed", "--only-binary=:all:", "--python-version", python,
         "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform",
         "manylinux_2_27_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform",
         "manylinux2014_x86_64", "--target", str(tmp_path / "t"), "--report", str(report),
         *reqs], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    def norm(name: str) -> str:
        return name.lower().replace("_", "-")

    got = {norm(i["metadata"]["name"]): i["metadata"]["version"].split("+")[0]  # 2.13.0+cpu
           for i in json.loads(report.read_text())["install"]}
    assert {norm(n): v for n, (_, v) in pins.items()} == got, (python, got)
