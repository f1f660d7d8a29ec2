"""`launcher build`: render into a temporary context and build it with live progress."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from launcher.cli.common import default_tag, resolve_profile
from launcher.cli.render_cmd import render_files, write_tree
from launcher.runtime.engine import BuildEvent
from launcher.runtime.engines import get_engine


class Progress:
    """Steps on their own lines; in a terminal, other output overwrites one status line."""

    def __init__(self, stream=sys.stdout) -> None:  # type: ignore[no-untyped-def]
        self.stream = stream
        self.tty = stream.isatty()
        self.width = 100

    def __call__(self, ev: BuildEvent) -> None:
        if ev.kind == "done":
            return
        if not self.tty:
            print(ev.text, file=self.stream, flush=True)
            return
        if ev.kind == "output":
            self.stream.write("\r\x1b[2K  " + ev.text[: self.width])
        else:
            self.stream.write("\r\x1b[2K" + ev.text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def build(profile: str, framework: str | None, base_image: str | None, tag: str | None,
          ca_cert: Path | None, host_root: Path | None, no_cache: bool = False) -> int:
    p = resolve_profile(profile, framework, host_root=host_root, inherit_shell=False,
                        for_this_host=False)
    tag = tag or default_tag(p.profile.name, p.framework)
    files = render_files(p, base_image, ca_cert, tag)
    engine = get_engine("docker")
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
        finally:
            progress.end()
    print(f"built {tag} ({image_id[:19]}) in {time.monotonic() - started:.1f}s")
    return 0
