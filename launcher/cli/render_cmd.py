"""`launcher render --profile NAME --out DIR`: every file a user can read, commit and build."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from launcher.cli.common import Prepared, default_tag, prepare
from launcher.errors import LauncherError
from launcher.render.compose import render_compose
from launcher.render.dockerfile import context_files, copy_package, image_spec
from launcher.render.runpod import render_runpod


def render_files(p: Prepared, base_image: str | None, ca_cert: Path | None, tag: str,
                 command: list[str] | None = None) -> dict[str, str]:
    """All text files of a render, in memory (nothing is written if any step fails)."""
    if ca_cert is not None and not ca_cert.is_file():
        raise LauncherError(f"--ca-cert: no such file {str(ca_cert)!r}")
    spec = image_spec(p.profile, p.framework, base_image, ca_cert is not None,
                      vendor=p.choice.vendor if p.choice.vendor != "none" else None)
    caps_doc = {"recipe": p.recipe, "resolved_on_build_host": p.caps.to_json()}
    files = context_files(spec, caps_doc)
    files["compose.yaml"] = render_compose(p.caps, tag, p.choice, p.facts, command, p.overrides)
    files["runpod.json"] = render_runpod(p.profile.name, tag, p.overrides, command)
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

    p = prepare(profile, framework, None, env, gpus, host_root, for_this_host=False)
    tag = tag or default_tag(p.profile.name, p.framework)
    files = render_files(p, base_image, ca_cert, tag, shlex.split(command) if command else None)
    write_tree(out, files)
    if as_json:
        print(json.dumps({"out": str(out), "files": sorted([*files, "launcher/"]), "tag": tag}))
    else:
        print(f"rendered profile {p.profile.name} ({p.framework}) into {out}:")
        for name in sorted([*files, "launcher/"]):
            print(f"  {name}")
        print(f"build it with `docker build -t {tag} {out}` or `launcher build --profile "
              f"{profile}`")
    return 0
