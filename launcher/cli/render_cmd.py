"""`launcher render --profile NAME --out DIR`: every file a user can read, commit and build."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from launcher.caps.resolve import Resolved
from launcher.cli.common import default_tag, resolve_profile
from launcher.errors import LauncherError
from launcher.render.compose import render_compose
from launcher.render.dockerfile import context_files, copy_package, image_spec
from launcher.render.runpod import render_runpod
from launcher.runtime.spec import per_gpu_specs


def render_files(r: Resolved, base_image: str | None, ca_cert: Path | None, tag: str,
                 command: list[str] | None = None) -> dict[str, str]:
    """All text files of a render, in memory (nothing is written if any step fails)."""
    if ca_cert is not None and not ca_cert.is_file():
        raise LauncherError(f"--ca-cert: no such file {str(ca_cert)!r}")
    spec = image_spec(r.profile, r.framework, r.selection.vendor, base_image,
                      ca_cert is not None)
    caps_doc = {"recipe": r.recipe(), "resolved_on_build_host": r.caps.to_json()}
    files = context_files(spec, caps_doc)
    files["compose.yaml"] = render_compose(r.profile.name, per_gpu_specs(r, command or [], tag),
                                           r.overrides)
    files["runpod.json"] = render_runpod(r.profile.name, tag, r.overrides, command)
    if ca_cert is not None:
        files["launcher-ca.crt"] = ca_cert.read_text()
    return files


def write_tree(out: Path, files: dict[str, str]) -> None:
    """Write files and the launcher package; each file is replaced whole, never half-written."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".launcher-render-", dir=out))
    try:
        for name, text in files.items():
            (staging / name).write_text(text)
        copy_package(staging)
        for name in files:
            os.replace(staging / name, out / name)
        if (out / "launcher").exists():
            shutil.rmtree(out / "launcher")
        os.replace(staging / "launcher", out / "launcher")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def render(profile: str, framework: str | None, out: Path, base_image: str | None,
           ca_cert: Path | None, tag: str | None, gpus: str | None, env: list[str] | None,
           host_root: Path | None, as_json: bool, command: str | None = None) -> int:
    import shlex

    r = resolve_profile(profile, framework, None, env, gpus, host_root, inherit_shell=False,
                        for_this_host=False)
    tag = tag or default_tag(r.profile.name, r.framework)
    files = render_files(r, base_image, ca_cert, tag, shlex.split(command) if command else None)
    write_tree(out, files)
    if as_json:
        print(json.dumps({"out": str(out), "files": sorted([*files, "launcher/"]), "tag": tag}))
    else:
        print(f"rendered profile {r.profile.name} ({r.framework}) into {out}:")
        for name in sorted([*files, "launcher/"]):
            print(f"  {name}")
        print(f"build it with `docker build -t {tag} {out}` or `launcher build --profile "
              f"{profile}`")
    return 0
