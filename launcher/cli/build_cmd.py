"""`launcher build`: render into a temporary context and build it with live progress."""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

from launcher.cli.common import resolve_profile
from launcher.cli.render_cmd import render_files, write_tree
from launcher.errors import EngineError
from launcher.render.images import build_command, default_tag
from launcher.runtime.engine import BuildEvent
from launcher.runtime.engines import first_that

# A terminal's control sequences (the classic builder colours a step's stderr red).
_ESCAPES = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")
# What pip, apt and curl say when a proxy re-signs TLS with a CA the image does not trust.
_TLS_UNTRUSTED = re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|"
                            r"x509: certificate|SSL certificate problem|"
                            r"Certificate verification failed", re.IGNORECASE)


class Progress:
    """Steps on their own lines; in a terminal, other output overwrites one status line.
    Control sequences from the build are dropped (they are no colour in a log); the output
    is kept for the error that may end the build."""

    def __init__(self, stream=None) -> None:  # type: ignore[no-untyped-def]
        self.stream = stream or sys.stdout  # the one in force now, not at import
        self.tty = self.stream.isatty()
        self.width = 100
        self.tls_untrusted = False

    def __call__(self, ev: BuildEvent) -> None:
        if ev.kind in ("done", "error"):  # an error ends the build with its own line
            return
        text = _ESCAPES.sub("", ev.text)
        self.tls_untrusted = self.tls_untrusted or bool(_TLS_UNTRUSTED.search(text))
        if not self.tty:
            print(text, file=self.stream, flush=True)
            return
        if ev.kind == "output":
            self.stream.write("\r\x1b[2K  " + text[: self.width])
        else:
            self.stream.write("\r\x1b[2K" + text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


# What a failed pull of the base image says (the daemon's words vary by cause).
_PULL_FAILED = re.compile(r"registry|pull access denied|lookup |dial tcp|no such host|"
                          r"manifest unknown|not found: manifest|TLS handshake|i/o timeout|"
                          r"connection refused|repository does not exist", re.IGNORECASE)


def _base_of(dockerfile: str) -> str:
    m = re.search(r"^FROM (\S+)", dockerfile, re.MULTILINE)
    return m.group(1) if m else "?"


def build(profile: str, framework: str | None, base_image: str | None, tag: str | None,
          ca_cert: Path | None, host_root: Path | None, no_cache: bool = False,
          push: bool = False) -> int:
    p = resolve_profile(profile, framework=framework, host_root=host_root, inherit_shell=False,
                        for_this_host=False)
    tag = tag or default_tag(p.profile.name, p.framework)
    files, _ = render_files(p, base_image, ca_cert, tag)
    engine = first_that("can_build")
    engine.ping()
    progress = Progress()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="launcher-build-") as ctx:
        write_tree(Path(ctx), files)
        print(f"building {tag} for profile {p.profile.name} ({p.framework}) ...", flush=True)
        try:
            image_id = engine.build(Path(ctx), tag, {"launcher.profile": p.profile.name,
                                                     "launcher.framework": p.framework}, progress,
                                   no_cache)
        except EngineError as exc:
            base = _base_of(files["Dockerfile"])
            if _PULL_FAILED.search(str(exc)) and not engine.image_exists(base):
                raise EngineError(
                    f"cannot pull the base image {base} (no registry reachable?): build a local "
                    f"one (debootstrap, then docker import) with `launcher examples --out . "
                    f"base-image.sh && bash base-image.sh launcher-base:bookworm`, then `"
                    + build_command(profile, p.framework, image=tag,
                                    base_image="launcher-base:bookworm",
                                    ca_cert=None if ca_cert is None else str(ca_cert))
                    + "` (or set image.base in the profile)") from None
            if progress.tls_untrusted:
                raise EngineError(f"{exc}: the build could not verify a TLS certificate (a proxy "
                                  f"that re-signs TLS?): pass its CA with --ca-cert PEM, e.g. "
                                  f"--ca-cert /etc/ssl/certs/ca-certificates.crt"
                                  + (" (this one did not help)" if ca_cert else "")) from None
            raise
        finally:
            progress.end()
    print(f"built {tag} ({image_id[:19]}) in {time.monotonic() - started:.1f}s")
    if push:
        print(f"pushing {tag} ...", flush=True)
        engine.push(tag, progress)
        progress.end()
        print(f"pushed {tag}: cloud templates can pull it (`launcher render --image {tag}`)")
    return 0
