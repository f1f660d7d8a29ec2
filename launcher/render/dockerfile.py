"""Profile -> Dockerfile text (pure) and the files of a build context."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.frameworks import get as get_framework
from launcher.profiles.loader import Profile
from launcher.render.images import check_apt_packages, check_image_ref, check_pip_requirements
from launcher.vendors import get as get_vendor

PACKAGE = Path(__file__).resolve().parents[1]
# Parts of the package an image needs: the standard-library-only supervisor and what it imports.
IMAGE_MODULES = ("__init__.py", "errors.py", "units.py", "glibc.py", "kernel.py", "variables.py",
                 "keys.py", "threadpools.py", "cpulist.py", "shipped.py", "registry.py",
                 "dists.py", "contract.py", "proctree.py", "rlimits.py", "defaults.py", "checks.py",
                 "probe", "caps", "profiles", "vendors", "frameworks", "supervise", "workloads",
                 "cgroups", "telemetry")
WATCH_NEEDS = ("psutil",)  # the watch's one need beyond the standard library, copied beside


@dataclass(frozen=True)
class ImageSpec:
    profile: Profile
    framework: str
    vendor: str
    base_image: str
    framework_requirements: list[str]
    profile_requirements: list[str]
    apt_packages: list[str]
    ca_cert: bool


def framework_requirements(framework: str, vendor: str) -> list[str]:
    """The image's framework layer: the framework's pins for this vendor, else the vendor's;
    an error where neither knows one (an image without its framework is no image)."""
    fw = get_framework(framework)
    if vendor in fw.unsupported:
        raise LauncherError(f"no {fw.label} image for {get_vendor(vendor).label} GPUs: "
                            f"{fw.unsupported[vendor]}; pick another --framework, or give "
                            f"--base-image and image.pip_packages that you know work")
    known = fw.requirements
    reqs = (known[vendor] if vendor in known else
            get_vendor(vendor).requirements.get(framework))
    if reqs is None:
        raise LauncherError(f"no {fw.label} requirements for {get_vendor(vendor).label} GPUs "
                            f"(the framework's module and the vendor's name none)")
    return list(reqs)


def image_spec(profile: Profile, framework: str, vendor: str, base_image: str | None = None,
               ca_cert: bool = False) -> ImageSpec:
    v = get_vendor(vendor)
    where = profile.where("image")
    if base_image is not None:
        base = check_image_ref(base_image, "--base-image")
    elif profile.get("image.base"):
        base = check_image_ref(profile.get("image.base"), f"{profile.where('image.base')}: "
                                                          "image.base")
    else:
        base = v.base_image
    return ImageSpec(
        profile=profile, framework=framework, vendor=vendor, base_image=base,
        framework_requirements=framework_requirements(framework, vendor),
        profile_requirements=check_pip_requirements(profile.get("image.pip_packages", []), where),
        apt_packages=check_apt_packages(profile.get("image.apt_packages", []), where),
        ca_cert=ca_cert,
    )


def _env(vendor_dir: Path | None = None):  # type: ignore[no-untyped-def]
    import jinja2

    from launcher.shipped import shipped

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in (vendor_dir, shipped("images")) if d]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_dockerfile(spec: ImageSpec) -> str:
    reqs = spec.framework_requirements + spec.profile_requirements
    v = get_vendor(spec.vendor)
    return _env(v.template_dir).get_template(v.template).render(
        profile_name=spec.profile.name,
        vendor=spec.vendor,
        framework=spec.framework,
        base_image=spec.base_image,
        apt_packages=spec.apt_packages,
        needs_pip=bool(reqs),
        framework_requirements=spec.framework_requirements,
        profile_requirements=spec.profile_requirements,
        ca_cert=spec.ca_cert,
    )


def context_files(spec: ImageSpec, caps_doc: dict[str, Any]) -> dict[str, str]:
    """Text files of the build context (besides the launcher package and the CA certificate)."""
    files = {
        "Dockerfile": render_dockerfile(spec),
        "caps.json": json.dumps(caps_doc, indent=2, sort_keys=True) + "\n",
        "entrypoint.py": (PACKAGE / "supervise" / "entrypoint.py").read_text(),
    }
    if spec.framework_requirements:
        files["requirements-framework.txt"] = "\n".join(spec.framework_requirements) + "\n"
    if spec.profile_requirements:
        files["requirements.txt"] = "\n".join(spec.profile_requirements) + "\n"
    return files


IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
PLUGINS = "plugins"  # the context folder copied beside the package: entry points and plugins
PACKAGE_DIRS = ("launcher", PLUGINS)  # the folders copy_package writes


def copy_package(dest: Path) -> None:
    """The image's copy of launcher (only the standard-library-only modules), and beside it the
    entry points of every distribution with launcher entries, with those plugins' packages: the
    supervisor resolves a framework or vendor through the same groups as on this host."""
    target = dest / "launcher"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in IMAGE_MODULES:
        src = PACKAGE / name
        if src.is_dir():
            shutil.copytree(src, target / name, ignore=IGNORE)
        else:
            shutil.copy2(src, target / name)
    copy_plugins(dest / PLUGINS)
    for top in WATCH_NEEDS:  # beside the package in the image (PLUGINS is copied there)
        _copy_top_level(top, dest / PLUGINS)


def copy_plugins(dest: Path) -> None:
    from launcher.dists import OWN, entry_points, plugin_dists

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    own = plugin_dists()
    if OWN not in own:  # a source tree: launcher's own entries from its pyproject.toml
        (dest / "launcher-0.dist-info").mkdir()
        (dest / "launcher-0.dist-info/entry_points.txt").write_text(_own_entry_points())
    for dist, folder in own.items():
        (dest / folder.name).mkdir()  # only what finding the entries takes (a README edit
        shutil.copy2(folder / "entry_points.txt", dest / folder.name)  # rebuilds nothing)
        name, _, version = folder.name.rsplit(".", 1)[0].partition("-")
        (dest / folder.name / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        if dist == OWN:
            continue
        tops = {e.value.split(":")[0].split(".")[0] for group in _groups(folder)
                for e in entry_points(group).values() if e.dist == dist}
        for top in sorted(tops):
            _copy_top_level(top, dest)


def _groups(folder: Path) -> list[str]:
    text = (folder / "entry_points.txt").read_text()
    return [line.strip()[1:-1] for line in text.splitlines()
            if line.startswith("[launcher.") and line.strip().endswith("]")]


def _copy_top_level(top: str, dest: Path) -> None:
    """A plugin's top-level package (or module), from where this interpreter imports it."""
    import importlib.util

    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin is None:
        raise LauncherError(f"plugin module {top!r} is declared in an entry point but cannot be "
                            f"found here; an image needs it")
    if spec.submodule_search_locations:
        shutil.copytree(Path(spec.origin).parent, dest / top, ignore=IGNORE)
    else:
        shutil.copy2(spec.origin, dest / Path(spec.origin).name)


def _own_entry_points() -> str:
    """launcher's entries, as a wheel's entry_points.txt has them, from its pyproject.toml."""
    from launcher.dists import OWN, entry_points, own_groups

    return "".join(f"[{g}]\n" + "".join(f"{n} = {e.value}\n" for n, e in
                                         entry_points(g).items() if e.dist == OWN) + "\n"
                   for g in own_groups())
