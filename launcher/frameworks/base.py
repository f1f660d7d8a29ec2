"""What every framework module provides: how to find it installed (no import), its thread
model (CPU and GPU terms, with the versions each was measured on), its calibration probe, its
packages per GPU vendor and its facts for `doctor`.

Standard library only: the supervisor in images and `launcher calibrate` inside an image's
build import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional, Tuple

from launcher.checks import Check
from launcher.keys import Key
from launcher.threadpools import ThreadPool

Parts = Dict[str, int]


SHARED = ("omp", "blas", "intra", "inter")  # the pools every framework's settings share


@dataclass(frozen=True)
class Settings:
    """The thread settings a process runs with (the managed variables, as numbers): the shared
    pools, and each framework's own counts in `extra`, by the names its `settings_from` gives
    them (a calibration file records them by those names too)."""

    omp: int = 1
    blas: int = 1
    intra: int = 1
    inter: int = 1
    extra: dict[str, int] = field(default_factory=dict, hash=False)

    def count(self, name: str, default: int) -> int:
        """A framework's own count, or `default` where it was not set."""
        return self.extra.get(name, default)

    def updated(self, values: dict[str, int]) -> Settings:
        """These settings with `values` (a shared pool or a framework's own count) set."""
        return replace(self, **{k: v for k, v in values.items() if k in SHARED},
                       extra={**self.extra, **{k: v for k, v in values.items()
                                               if k not in SHARED}})

    def as_dict(self) -> dict[str, int]:
        """As a calibration entry records them: one flat mapping (`of` reads it back)."""
        return {**{k: getattr(self, k) for k in SHARED}, **self.extra}

    @classmethod
    def of(cls, values: dict[str, Any]) -> Settings:
        """From recorded settings (a calibration entry's): what is not a whole number is left
        out."""
        numbers = {}
        for k, v in values.items():
            try:
                numbers[k] = int(v)
            except (TypeError, ValueError):
                continue
        return cls().updated(numbers)


@dataclass(frozen=True)
class Installed:
    version: str | None  # None: not installed where the estimate is made
    build: str = "unknown"  # cpu | cuda | rocm | unknown (a GPU build may start GPU threads)


NOT_HERE = Installed(None)


@dataclass(frozen=True)
class Model:
    """Thread terms measured on one version series (`0.11` covers 0.11.*)."""

    series: str
    measured: str  # on what, where, when
    cpu: Callable[[Settings, int, Installed], Parts]  # (settings, CPUs, build) -> parts
    gpu: Callable[[int, int], Parts]  # (CPUs, GPUs seen) -> parts added when GPUs > 0
    # (CPUs, GPUs seen) -> pools a real program grows that the calibration probe's few steps
    # never reach: in every estimate, never in what a calibration is compared with
    beyond_probe: Callable[[int, int], Parts] = lambda _cpus, _gpus: {}

    def covers(self, version: str | None) -> bool:
        return version is not None and (version == self.series or
                                        version.startswith(self.series + "."))


Want = Dict[str, Tuple[Optional[str], str]]  # variable -> (value or None: removed, its source)


@dataclass(frozen=True)
class Pools:
    """What a framework's own variables derive from: the intra- and inter-op pools (with where
    each came from) and the profile (`pick` gives a key's value, or its auto value and why)."""

    intra: int
    intra_src: str
    inter: int
    inter_src: str
    pick: Callable[[str, int, str], tuple[int, str]]
    get: Callable[[str], Any]  # a profile key's value
    src: Callable[[str], str]  # where a profile key was set
    gpu_build: str = "cpu"  # the framework build the GPU vendor's GPUs take (Vendor.gpu_build)

    @property
    def same(self) -> str:
        return f"= intra_op {self.intra} <- {self.intra_src}"


@dataclass(frozen=True)
class Estimate:
    parts: Parts
    source: str


@dataclass(frozen=True)
class Framework:
    name: str
    label: str
    module: str  # what `import` names
    distributions: tuple[str, ...]  # package names whose metadata gives the version
    install: str  # what to pip install on the host for a native run
    models: tuple[Model, ...]  # newest last
    requirements: dict[str, list[str]]  # GPU vendor -> the image's framework layer (pinned)
    # GPU vendor -> why no image of this framework is built for it (a render says so)
    unsupported: dict[str, str] = field(default_factory=dict)
    rounding: str = "down"  # a fractional CPU quota: half-up or down (pool_cpus)
    facts: tuple[str, ...] = ()  # for `doctor`
    probe: str = ""  # module with first_op(), train(), matmul(n) for threadprobe
    detect_build: Callable[[], str] = field(default=lambda: "cpu")
    needed: bool = True  # a workload of it needs `module` importable (numpy for `none`: no)
    # the top-level modules besides `module` whose import in a script marks it (its libraries:
    # torchvision, flax); launcher/frameworks/detect.py reads every framework's
    marks: tuple[str, ...] = ()
    # the variable of pools no thread variable caps, only the affinity (XLA's codegen: its
    # PJRT_NPROC); `--fit` may then shrink the cpuset
    affinity_bound: str | None = None
    checks: tuple[Check, ...] = ()  # its own verdict checks (launcher/checks.py)
    # its own profile keys (section -> key -> Key), variables (name -> why, for the managed
    # table), the values it sets for them, and the Settings names those variables feed back
    # (an explicit -e of one counts in the thread model)
    profile_keys: dict[str, dict[str, Key]] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    environment: Callable[[Pools], Want] = field(default=lambda pools: {})
    # Settings name -> variable: a shared pool, or its own count (in Settings.extra)
    settings_from: dict[str, str] = field(default_factory=dict)
    # its pools on the line a run starts with: variable -> short name ("TF intra")
    pool_labels: dict[str, str] = field(default_factory=dict)
    # its estimate's parts that are libgomp workers (their stacks are OMP_STACKSIZE's)
    omp_parts: tuple[str, ...] = ()
    # its threads by name, for the census of a run (launcher/telemetry/census.py); a mapped
    # library that shows it loaded in a process; whose its unnamed threads most likely are
    # (Linux keeps 15 characters of a name: a longer one is refused, and the thread keeps its
    # creator's); and how to stop its pools growing across cycles
    thread_pools: tuple[ThreadPool, ...] = ()
    loaded_from: str = ""
    unnamed_pools: str = ""
    growth_fix: str = ""
    files_fix: str = ""  # and how to stop the open files growing, where it has its own way

    def installed(self) -> Installed:
        """The version in this interpreter's environment, from the package's metadata folder
        on sys.path (no import of the framework, nor of importlib.metadata: ~20 ms)."""
        from launcher.dists import version as dist_version

        for dist in self.distributions:
            version = dist_version(dist)
            if version is not None:
                return Installed(version, self.detect_build())
        return NOT_HERE

    def estimate(self, settings: Settings, cpus: int, gpus: int,
                 installed: Installed = NOT_HERE, probe_only: bool = False, *,
                 origin: str = "built-in") -> Estimate:
        """Peak threads of one process (`probe_only`: of the calibration probe, which a real
        program exceeds). A version the model was not measured on (or none known, as for an
        image) takes the largest of the measured models: it errs high."""
        model = next((m for m in self.models if m.covers(installed.version)), None)
        if model is not None:
            return Estimate(_parts(model, s=settings, cpus=cpus, gpus=gpus, installed=installed,
                                   probe_only=probe_only), f"{origin} model ({model.measured})")
        tried = [(_parts(m, s=settings, cpus=cpus, gpus=gpus, installed=installed,
                         probe_only=probe_only), m) for m in self.models]
        parts, m = max(tried, key=lambda pm: sum(pm[0].values()))
        what = (f"{self.label} {installed.version} is not a version the model was measured on"
                if installed.version else f"{self.label} is not installed here")
        series = ", ".join(x.series for x in self.models)
        return Estimate(parts, f"{origin} model, the largest of its measured versions "
                               f"({series}: {m.measured}); {what}, so it errs high")


def _parts(model: Model, *, s: Settings, cpus: int, gpus: int, installed: Installed,
           probe_only: bool = False) -> Parts:
    parts = {"main": 1, **model.cpu(s, cpus, installed)}
    if gpus:
        parts.update(model.gpu(cpus, gpus))
    if not probe_only:
        parts.update(model.beyond_probe(cpus, gpus))
    return {k: v for k, v in parts.items() if v > 0 or k == "main"}


def openblas(s: Settings, cpus: int) -> Parts:
    """numpy's OpenBLAS pool: its workers besides the caller, never more than the affinity."""
    return {"openblas": min(s.blas, cpus) - 1}
