"""A plugin's own verdict checks: a framework, a vendor or a workload may declare `checks`,
each a function of what the plan knows that returns (level, sentence) pairs ("warn" or
"refuse"); the verdict says them beside its own, as the plugin's kind (caps/verdict.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Tuple


@dataclass(frozen=True)
class CheckInput:
    profile: Any  # the resolved profile (profiles/loader.Profile): `.get("section.key")`
    facts: Any  # the host's (probe/host.HostFacts)
    gpus: int  # the GPUs the run gets


Check = Callable[[CheckInput], List[Tuple[str, str]]]  # typing's: evaluated by 3.8
