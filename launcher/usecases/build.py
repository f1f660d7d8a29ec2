"""`launcher build`: the render of a profile in a temporary context, built by the first engine
that builds (and pushed, when asked), its progress through a callback."""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import EngineError
from launcher.render.images import default_tag
from launcher.runtime.engine import BuildEvent, Engine
from launcher.runtime.engines import first_that
from launcher.usecases.build_request import BuildRequest, build_command
from launcher.usecases.events import OnEvent, Teller
from launcher.usecases.render import render_files, write_tree

__all__ = ["BuildRequest", "BuildEvent", "BuildRequest", "BuildResult", "build"]

# What pip, apt and curl say when a proxy re-signs TLS with a CA the image does not trust.
_TLS_UNTRUSTED = re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|"
                            r"x509: certificate|SSL certificate problem|"
                            r"Certificate verification failed", re.IGNORECASE)
# What a failed pull of the base image says (the daemon's words vary by cause).
_PULL_FAILED = re.compile(r"registry|pull access denied|lookup |dial tcp|no such host|"
                          r"manifest unknown|not found: manifest|TLS handshake|i/o timeout|"
                          r"connection refused|repository does not exist", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    tag: str
    image_id: str
    seconds: float
    pushed: bool


def build(req: BuildRequest, *, on_progress: Callable[[BuildEvent], None],
          on_event: OnEvent | None = None) -> BuildResult:
    """`on_progress` takes the engine's build and push events; `on_event` the steps
    (building, built, pushing)."""
    from launcher.caps.load import load_and_resolve

    tell = Teller(on_event)
    p = load_and_resolve(req.profile, framework=req.framework, host_root=req.host_root,
                         inherit_shell=False, for_this_host=False)
    tag = req.tag or default_tag(p.profile.name, p.framework)
    files, _ = render_files(p, base_image=req.base_image, ca_cert=req.ca_cert, tag=tag)
    engine = first_that("can_build")
    engine.ping()
    untrusted = []

    def progress(ev: BuildEvent) -> None:
        if _TLS_UNTRUSTED.search(ev.text):
            untrusted.append(ev.text)
        on_progress(ev)

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="launcher-build-") as ctx:
        write_tree(Path(ctx), files)
        tell("step", f"building {tag} for profile {p.profile.name} ({p.framework}) ...")
        try:
            image_id = engine.build(Path(ctx), tag, {"launcher.profile": p.profile.name,
                                                     "launcher.framework": p.framework},
                                    progress, req.no_cache)
        except EngineError as exc:
            raise _why(exc, req=req, dockerfile=files["Dockerfile"], engine=engine, tag=tag,
                       framework=p.framework, untrusted=bool(untrusted)) from None
    seconds = time.monotonic() - started
    tell("step", f"built {tag} ({image_id[:19]}) in {seconds:.1f}s")
    if req.push:
        tell("step", f"pushing {tag} ...")
        engine.push(tag, progress)
        tell("step", f"pushed {tag}: cloud templates can pull it (`launcher render --image "
                     f"{tag}`)")
    return BuildResult(tag=tag, image_id=image_id, seconds=seconds, pushed=req.push)


def _why(exc: EngineError, *, req: BuildRequest, dockerfile: str, engine: Engine, tag: str,
         framework: str, untrusted: bool) -> EngineError:
    """A failed build in words that say what to do: a base image no registry gave, a TLS
    certificate a proxy re-signed; else the engine's own error."""
    m = re.search(r"^FROM (\S+)", dockerfile, re.MULTILINE)
    base = m.group(1) if m else "?"
    if _PULL_FAILED.search(str(exc)) and not engine.image_exists(base):
        return EngineError(
            f"cannot pull the base image {base} (no registry reachable?): build a local "
            f"one (debootstrap, then docker import) with `launcher examples --out . "
            f"base-image.sh && bash base-image.sh launcher-base:bookworm`, then `"
            + build_command(req.profile, framework, image=tag,
                            base_image="launcher-base:bookworm",
                            ca_cert=None if req.ca_cert is None else str(req.ca_cert))
            + "` (or set image.base in the profile)")
    if untrusted:
        return EngineError(f"{exc}: the build could not verify a TLS certificate (a proxy "
                           f"that re-signs TLS?): pass its CA with --ca-cert PEM, e.g. "
                           f"--ca-cert /etc/ssl/certs/ca-certificates.crt"
                           + (" (this one did not help)" if req.ca_cert else ""))
    return exc
