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


@pytest.mark.parametrize("vendor", ["nvidia", "amd", "none"])
@pytest.mark.parametrize("fw", names())
def test_every_image_is_pinned_or_refused_with_its_reason(fw, vendor):
    """No image without its framework: each framework x vendor pins every requirement (index
    options aside), or a render refuses it in one line saying why (jax[rocm] once installed
    the CPU jaxlib with no word)."""
    from launcher.errors import LauncherError

    framework = get(fw)
    if vendor in framework.unsupported:
        with pytest.raises(LauncherError, match=f"no {framework.label} image for"):
            framework_requirements(fw, vendor)
        return
    reqs = [r for r in framework_requirements(fw, vendor) if not r.startswith("--")]
    assert fw == "none" or reqs, (fw, vendor)
    unpinned = [r for r in reqs if "==" not in r and r != "numpy"]  # none's numpy: the base's
    assert not unpinned, (fw, vendor, unpinned)


def test_an_unsupported_image_is_refused_before_anything_is_written(tmp_path):
    from click.testing import CliRunner

    from launcher.cli.main import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["render", "-p", "rig-6600", "-f", "jax", "--out",
                                      str(out)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no jax image for AMD GPUs: jax 0.10 has no `rocm`")
    assert not out.exists()


def test_the_docs_name_the_base_images_a_render_uses():
    from pathlib import Path

    from launcher.vendors import all_vendors

    page = (Path(__file__).resolve().parent.parent / "docs/images.md").read_text()
    for v in all_vendors():
        assert f"`{v.base_image}`" in page, v.name
