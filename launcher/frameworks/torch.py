"""PyTorch: its intra-op pool and OpenBLAS's never exceed the CPUs in the affinity; a CUDA
build starts a `cuda` thread even with no GPU visible."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from launcher.frameworks.base import (
    Framework,
    Installed,
    Model,
    Parts,
    Pools,
    Settings,
    Want,
    openblas,
)
from launcher.keys import Key
from launcher.threadpools import ThreadPool


def _cpu(s: Settings, cpus: int, installed: Installed) -> Parts:
    # torch 2.13 CPU (1-2 CPUs) and 2.11+cu130 (1-16 CPUs, 2026-11): the intra-op pool minus
    # the caller beside OpenBLAS's (a process that never imports numpy starts only one of the
    # two: counted both); training adds nothing on the CPU. A build whose kind is unknown (an
    # image's) counts the CUDA thread: errs high.
    parts = {**openblas(s, cpus), "torch_intra_op": min(s.omp, cpus) - 1}
    if installed.build in ("cuda", "rocm", "unknown"):
        parts["gpu_build"] = 1  # `cuda`, started at import by a CUDA build
    return parts


def _gpu(cpus: int, gpus: int) -> Parts:
    # One H100, torch 2.11+cu130: pt_autograd (autograd's device thread) and cuda-EvtHandlr,
    # counted per GPU (Engine::start_device_threads starts one per device).
    return {"torch_autograd_device": gpus, "gpu_event_handler": gpus}


def detect_build() -> str:
    """cuda, rocm or cpu, from the library files of the installed package (no import)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return "unknown"
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    if any(lib.glob("libtorch_cuda*.so*")):
        return "cuda"
    if any(lib.glob("libtorch_hip*.so*")):
        return "rocm"
    return "cpu"


def first_op() -> None:
    import torch

    a = torch.ones(256, 256)
    (a @ a).sum().item()


def train() -> None:
    import torch

    layer = torch.nn.TransformerEncoderLayer(32, nhead=2, dim_feedforward=64,
                                             batch_first=True, dropout=0.0)
    enc = torch.nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    enc = enc.to(dev)
    opt = torch.optim.Adam(enc.parameters())
    for _ in range(5):
        loss = enc(torch.randn(64, 8, 32, device=dev)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def matmul(n: int) -> Callable[[], object]:
    import torch

    a = torch.ones(n, n)
    return lambda: (a @ a)[0, 0].item()


MIN_SAFE_SPLIT_MB = 21  # its caching allocator rejects or misbehaves below this


def _alloc_conf(conf: object) -> str | None:
    """Why an allocator.torch value is wrong (None: it is right)."""
    for item in str(conf).split(","):
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            return f"expected key:value[,key:value] (got {conf!r})"
        if key.strip() == "max_split_size_mb" and (
            not value.strip().isdigit() or int(value) < MIN_SAFE_SPLIT_MB
        ):
            return (f"max_split_size_mb must be a whole number >= {MIN_SAFE_SPLIT_MB} "
                    f"(got {value.strip()!r})")
    return None


ALLOC_VARIABLES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")  # every build reads one
# a GPU build's own spelling besides (by Vendor.gpu_build)
BUILD_ALLOC_VARIABLES = {"rocm": ("PYTORCH_HIP_ALLOC_CONF",)}


def _environment(p: Pools) -> Want:
    conf = p.get("allocator.torch")
    if conf is None:
        return {}
    return {name: (conf, p.src("allocator.torch")) for name in
            (*ALLOC_VARIABLES, *BUILD_ALLOC_VARIABLES.get(p.gpu_build, ()))}


FRAMEWORK = Framework(
    name="torch", label="torch", module="torch", distributions=("torch",),
    marks=("torchvision", "torchaudio", "lightning", "pytorch_lightning"),
    install="torch==2.13.0",
    omp_parts=("torch_intra_op",),  # libgomp's workers
    # measured on an H200 (torch 2.11+cu130), 2026-11-26: its intra-op (libgomp) workers are
    # unnamed; autograd names one thread per device, c10d two per process group
    thread_pools=(
        ThreadPool(r"pt_nccl_(watchdg|heartbt)", "torch NCCL process groups",
                   "destroy each cycle's process groups (torch.distributed."
                   "destroy_process_group) before the next"),
        ThreadPool(r"PTThreadPool$|pt_thread_pool$", "torch inter-op"),
        ThreadPool(r"pt_autograd", "torch autograd"),
        ThreadPool(r"pt_tcpstore", "torch TCPStore"),
        ThreadPool(r"pt_", "torch"),
    ),
    loaded_from="libtorch_cpu",
    unnamed_pools="the intra-op pool's OpenMP workers, OpenBLAS's, and Python threads "
                  "(DataLoader pin-memory threads, executors)",
    growth_fix=("close each cycle's DataLoader iterators (persistent_workers=False, or del the "
                "iterator) and free its models and optimizers (del, gc.collect(), "
                "torch.cuda.empty_cache()), or run each cycle in a fresh process"),
    # tensors from DataLoader workers come through shared memory, a descriptor each while
    # they live (the default file_descriptor strategy, torch.multiprocessing's docs)
    files_fix=("free what holds the descriptors: batches kept from a DataLoader with workers "
               "hold one each (keep .item() or .clone() of what you need, or share through "
               "files: torch.multiprocessing.set_sharing_strategy('file_system')), and each "
               "process group its pipes and sockets (dist.destroy_process_group(group))"),
    models=(Model("2", "torch 2.13 CPU at 1-2 CPUs; 2.11+cu130 at 1-16 CPUs with one H100, "
                       "2026-11", _cpu, _gpu),),
    requirements={"nvidia": ["torch==2.11.0"],
                  # the newest release with ROCm 6.4 builds (the AMD base is ROCm 6.4.1)
                  "amd": ["--index-url https://download.pytorch.org/whl/rocm6.4", "torch==2.9.1"],
                  "none": ["--index-url https://download.pytorch.org/whl/cpu", "torch==2.13.0"]},
    rounding="half-up",  # its idle workers block soon: a fractional CPU of quota pays
    facts=("OMP_NUM_THREADS and MKL_NUM_THREADS size the intra-op pool; "
           "torch.set_num_interop_threads works once, before any parallel work",),
    probe=__name__,
    detect_build=detect_build,
    profile_keys={"allocator": {"torch": Key("str", "PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF "
                                                    "(and PYTORCH_HIP_ALLOC_CONF on AMD); "
                                                    "max_split_size_mb must be >= 21",
                                             check=_alloc_conf)}},
    variables={"PYTORCH_ALLOC_CONF": "PyTorch allocator (newer name)",
               "PYTORCH_CUDA_ALLOC_CONF": "PyTorch CUDA allocator (older name)",
               "PYTORCH_HIP_ALLOC_CONF": "PyTorch ROCm allocator"},
    environment=_environment,
)
