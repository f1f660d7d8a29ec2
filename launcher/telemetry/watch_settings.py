"""What the watch is told, in one typed object: written by launcher (`launcher run`, a job's
chunk) into one variable (contract.WATCH, JSON), read back by the supervisor, else made from the
image's recipe (the profile's `growth` keys). One "off" rule: `LAUNCHER_WATCH=0` (or off, no,
false), which a user may set too. Standard library only, a plain class (dataclasses costs ~8 ms
of every container start): it runs in every image."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from launcher import contract as c

OFF = ("0", "off", "no", "false")


def is_off(environ: dict[str, str]) -> bool:
    return (environ.get(c.WATCH) or "").strip().lower() in OFF


class WatchSettings:
    def __init__(self, *, growth: dict[str, Any] | None = None, interval: float = 1.0,
                 framework: str | None = None, profile: str | None = None,
                 estimate: dict[str, Any] | None = None, runtime: str | None = None) -> None:
        self.growth = growth or {}  # GrowthOptions.to_json()
        self.interval = interval  # seconds between samples
        self.framework = framework  # whose threads the estimate budgets
        self.profile = profile
        self.estimate = estimate  # the threads estimate (Estimate.to_json())
        self.runtime = runtime  # who started it: docker, podman, native (None: found here)
        self.sample = True  # False where psutil is missing: the words alone
        self._options: Any = None

    def to_env(self) -> dict[str, str]:
        """The supervisor's variable."""
        d = {"growth": self.growth, "interval": self.interval, "framework": self.framework,
             "profile": self.profile, "estimate": self.estimate, "runtime": self.runtime}
        return {c.WATCH: json.dumps({k: v for k, v in d.items() if v is not None})}

    @classmethod
    def from_env(cls, environ: dict[str, str], recipe: Any = None,
                 say: Callable[[str], None] | None = None) -> WatchSettings | None:
        """None where the watch is off. `recipe`: the image's, resolved here, whose profile's
        growth keys apply unless launcher sent its own."""
        if is_off(environ):
            return None
        raw = (environ.get(c.WATCH) or "").strip()
        try:
            d: dict[str, Any] = json.loads(raw) if raw.startswith("{") else {}
        except ValueError:
            d = {}
        s = cls(growth=d.get("growth") or {}, interval=float(d.get("interval") or 1.0),
                framework=d.get("framework"), profile=d.get("profile"),
                estimate=d.get("estimate"), runtime=d.get("runtime"))
        if recipe is not None:
            if "growth" not in d:
                from launcher.telemetry.growth_watch import GrowthOptions

                try:
                    s.growth = GrowthOptions.of(recipe.profile).to_json()
                except ValueError as exc:  # a bad growth.cycle: said, and the defaults watch
                    if say is not None:
                        say(f"warning: {exc}")
            s.framework = s.framework or recipe.framework
            s.profile = s.profile or recipe.caps.profile
            s.estimate = s.estimate or recipe.caps.estimate.to_json()
        return s

    @property
    def options(self) -> Any:
        """The growth options (telemetry.growth_watch.GrowthOptions), compiled once."""
        if self._options is None:
            from launcher.telemetry.growth_watch import GrowthOptions

            self._options = GrowthOptions.from_json(self.growth)
        return self._options
