#!/usr/bin/env python3
"""Census of the Linux threads that GPU runtimes start inside a process.

Reads /proc/self/task/*/comm after each stage of a short workload and writes
JSON: per stage the {thread name: count} of this process's own threads, the
total, and what appeared/vanished since the previous stage.  Errors are
recorded per stage; a failed stage makes the later stages of the same mode be
skipped (they depend on it) but never crashes the run.  The JSON file is
rewritten after every stage, so a hang still leaves the stages done so far.

Usage:
    python3 scripts/gpu-thread-census.py torch|torch-nccl|jax|jax-cpu OUTFILE
    python3 scripts/gpu-thread-census.py all OUTDIR

`all` runs torch, jax, jax-cpu (JAX pinned to the CPU, a baseline for jax)
and torch-nccl, each in its own subprocess with a 120 s timeout and
XLA_PYTHON_CLIENT_PREALLOCATE=false, and writes OUTDIR/<mode>.json plus
OUTDIR/meta.json (nvidia-smi -L, torch/jax versions, nproc, date) and a short
text summary on stdout.

Only the standard library is imported at module level; torch and jax are
imported inside the stage functions.
"""

from __future__ import annotations

import collections
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback

SETTLE_S = 0.5  # let asynchronously started threads appear before a census
CHILD_TIMEOUT_S = 120
# torch-nccl runs last in `all`: it is the one most likely to hang (destroy_process_group).
MODES = ("torch", "jax", "jax-cpu", "torch-nccl")
ENV_KEYS = (
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_FLAGS", "JAX_PLATFORMS", "NCCL_DEBUG",
    "NCCL_SOCKET_IFNAME", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "CUDA_MODULE_LOADING",
)


# --------------------------------------------------------------------------- census

def thread_names() -> list[tuple[int, str]]:
    """(tid, comm) of every thread of this process, in tid order."""
    out = []
    base = "/proc/self/task"
    for tid in sorted(os.listdir(base), key=int):
        try:
            with open(f"{base}/{tid}/comm") as f:
                out.append((int(tid), f.read().rstrip("\n")))
        except OSError:  # thread exited between listdir and open
            pass
    return out


def census() -> dict:
    tasks = thread_names()
    counts = collections.Counter(name for _, name in tasks)
    return {"total": len(tasks), "threads": dict(sorted(counts.items())),
            "order": [name for _, name in tasks]}


def _diff(now: dict, before: dict) -> tuple[dict, dict]:
    a, b = collections.Counter(now), collections.Counter(before)
    return dict(sorted((a - b).items())), dict(sorted((b - a).items()))


class Recorder:
    def __init__(self, mode: str, outfile: str):
        self.mode, self.outfile = mode, outfile
        self.doc = {
            "mode": mode, "pid": os.getpid(), "python": sys.version.split()[0],
            "executable": sys.executable, "platform": platform.platform(),
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
            "versions": {}, "stages": [],
        }
        self.prev = {}
        self.failed = None
        self.ctx: dict = {}  # objects that must outlive a stage (tensors, groups)

    def stage(self, name: str, fn=None, force: bool = False) -> None:
        """Run fn(ctx), then take a census.  force: run even after an earlier failure."""
        rec = {"stage": name, "ok": True, "error": None, "info": {}}
        t0 = time.monotonic()
        if fn is not None and self.failed is not None and not force:
            rec.update(ok=False, error=f"skipped: stage {self.failed!r} failed")
        elif fn is not None:
            try:
                info = fn(self.ctx)
                if info:
                    rec["info"] = info
            except BaseException as e:  # noqa: BLE001 - record everything, even SystemExit
                rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:2000],
                           traceback=traceback.format_exc()[-4000:])
                self.failed = self.failed or name
        rec["seconds"] = round(time.monotonic() - t0, 3)
        time.sleep(SETTLE_S)
        c = census()
        rec["total"], rec["threads"], rec["order"] = c["total"], c["threads"], c["order"]
        rec["new"], rec["gone"] = _diff(c["threads"], self.prev)
        self.prev = c["threads"]
        self.doc["stages"].append(rec)
        self.write()
        status = "ok" if rec["ok"] else rec["error"].splitlines()[0][:160]
        print(f"[{self.mode}] {name}: total={rec['total']} new={rec['new']} ({status})",
              file=sys.stderr, flush=True)

    def write(self) -> None:
        tmp = self.outfile + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, sort_keys=False)
        os.replace(tmp, self.outfile)


# --------------------------------------------------------------------------- torch

def _torch_import(ctx):
    import torch
    ctx["torch"] = torch
    return {"torch": torch.__version__, "cuda_build": torch.version.cuda,
            "cudnn": _safe(lambda: torch.backends.cudnn.version()),
            "intraop_threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads()}


def _safe(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def _torch_cpu_work(ctx):
    torch = ctx["torch"]
    a = torch.randn(512, 512, requires_grad=True)
    (a @ a).relu().sum().backward()
    x = torch.randn(2, 3, 32, 32)
    torch.nn.functional.conv2d(x, torch.randn(8, 3, 3, 3))
    return {"grad_norm": float(a.grad.norm())}


def _torch_cuda_init(ctx):
    torch = ctx["torch"]
    torch.cuda.init()
    ctx["t"] = torch.ones(16, device="cuda")
    return {"device": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
            "driver_capability": list(torch.cuda.get_device_capability(0))}


def _torch_matmul(ctx):
    torch = ctx["torch"]
    a = torch.randn(1024, 1024, device="cuda")
    ctx["mm"] = a @ a
    torch.cuda.synchronize()
    return {"sum": float(ctx["mm"].sum())}


def _torch_backward(ctx):
    torch = ctx["torch"]
    lin = torch.nn.Linear(256, 256).cuda()
    x = torch.randn(64, 256, device="cuda", requires_grad=True)
    lin(x).relu().sum().backward()
    torch.cuda.synchronize()
    return {"grad_norm": float(x.grad.norm())}


def _torch_cudnn(ctx):
    torch = ctx["torch"]
    conv = torch.nn.Conv2d(3, 16, 3).cuda()
    x = torch.randn(8, 3, 64, 64, device="cuda", requires_grad=True)
    conv(x).sum().backward()
    torch.cuda.synchronize()
    return {"cudnn_enabled": torch.backends.cudnn.enabled}


def _torch_stream(ctx):
    torch = ctx["torch"]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.randn(512, 512, device="cuda") * 2
        ev = torch.cuda.Event()
        ev.record(s)
    s.synchronize()
    ctx["stream"], ctx["y"] = s, y
    return {"stream": repr(s)}


def _settle(seconds):
    def fn(ctx):
        time.sleep(seconds)
    return fn


def run_torch(rec: Recorder) -> None:
    rec.stage("start")
    rec.stage("import torch", _torch_import)
    rec.doc["versions"]["torch"] = rec.doc["stages"][-1]["info"].get("torch")
    rec.stage("cpu matmul+backward+conv (CPU-only baseline)", _torch_cpu_work)
    rec.stage("cuda init + cuda tensor", _torch_cuda_init)
    rec.stage("gpu matmul + synchronize (cuBLAS)", _torch_matmul)
    rec.stage("gpu backward (autograd device threads)", _torch_backward)
    rec.stage("gpu conv2d fwd+bwd (cuDNN)", _torch_cudnn)
    rec.stage("torch.cuda.Stream use", _torch_stream)
    rec.stage("settle 2s", _settle(2.0))


# --------------------------------------------------------------------------- torch-nccl

def _nccl_device(ctx):
    torch = ctx["torch"]
    torch.cuda.set_device(0)
    ctx["t"] = torch.ones(16, device="cuda")
    torch.cuda.synchronize()
    return {"device": torch.cuda.get_device_name(0),
            "nccl": _safe(lambda: ".".join(map(str, torch.cuda.nccl.version())))}


def _nccl_init(ctx):
    import torch.distributed as dist
    ctx["dist"] = dist
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29511", rank=0, world_size=1)
    return {"backend": dist.get_backend(), "world_size": dist.get_world_size()}


def _nccl_allreduce(ctx):
    torch, dist = ctx["torch"], ctx["dist"]
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    return {"value": float(t[0])}


def _nccl_group2(ctx):
    torch, dist = ctx["torch"], ctx["dist"]
    g = dist.new_group([0])
    ctx["g"] = g
    t = torch.full((1024,), 3.0, device="cuda")
    dist.all_reduce(t, group=g)
    torch.cuda.synchronize()
    return {"value": float(t[0])}


def _nccl_destroy(ctx):
    ctx["dist"].destroy_process_group()
    ctx.pop("g", None)


def run_torch_nccl(rec: Recorder) -> None:
    rec.stage("start")
    rec.stage("import torch", _torch_import)
    rec.doc["versions"]["torch"] = rec.doc["stages"][-1]["info"].get("torch")
    rec.stage("set_device(0) + cuda tensor (CUDA baseline)", _nccl_device)
    # Tried even if set_device failed, so that the NCCL error itself is recorded.
    rec.stage("init_process_group nccl tcp world_size=1", _nccl_init, force=True)
    rec.stage("all_reduce + synchronize", _nccl_allreduce)
    rec.stage("new_group + all_reduce on it", _nccl_group2)
    rec.stage("destroy_process_group", _nccl_destroy)
    rec.stage("settle 2s", _settle(2.0))


# --------------------------------------------------------------------------- jax

def _jax_import(ctx):
    import jax
    import jax.numpy as jnp
    ctx["jax"], ctx["jnp"] = jax, jnp
    import jaxlib
    return {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", None)}


def _jax_devices(ctx):
    jax = ctx["jax"]
    devs = jax.devices()
    return {"devices": [repr(d) for d in devs], "platform": devs[0].platform,
            "backend": jax.default_backend()}


def _jax_matmul(ctx):
    jax, jnp = ctx["jax"], ctx["jnp"]
    f = jax.jit(lambda a, b: jnp.tanh(a @ b))
    a = jnp.ones((1024, 1024), dtype=jnp.float32)
    ctx["r1"] = f(a, a).block_until_ready()
    return {"sum": float(ctx["r1"].sum())}


def _jax_put_second(ctx):
    jax = ctx["jax"]
    import numpy as np
    host = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    x = jax.device_put(host)
    g = jax.jit(lambda v: (v * 2.0 + 1.0).sum(axis=0))
    ctx["r2"] = g(x).block_until_ready()
    back = np.asarray(ctx["r2"])  # device-to-host copy too
    return {"device": repr(list(x.devices())), "first": float(back[0])}


def run_jax(rec: Recorder) -> None:
    rec.stage("start")
    rec.stage("import jax", _jax_import)
    rec.doc["versions"]["jax"] = rec.doc["stages"][-1]["info"].get("jax")
    rec.stage("jax.devices()", _jax_devices)
    rec.stage("jitted matmul + block_until_ready", _jax_matmul)
    rec.stage("device_put host array + second jit", _jax_put_second)
    rec.stage("settle 2s", _settle(2.0))


# --------------------------------------------------------------------------- driver

def run_mode(mode: str, outfile: str) -> int:
    if mode == "jax-cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    rec = Recorder(mode, outfile)
    try:
        {"torch": run_torch, "torch-nccl": run_torch_nccl,
         "jax": run_jax, "jax-cpu": run_jax}[mode](rec)
    finally:
        rec.doc["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
        rec.write()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: runtime atexit hooks can hang; the data is written.
    os._exit(0)


def _cmd(args, timeout=30):
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return {"rc": p.returncode, "stdout": p.stdout.strip(), "stderr": p.stderr.strip()[-2000:]}
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}


def _write_json(path: str, doc: dict) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


def run_all(outdir: str) -> int:
    os.makedirs(outdir, exist_ok=True)
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "hostname": platform.node(), "platform": platform.platform(),
        "python": sys.version, "executable": sys.executable,
        "nproc": _cmd(["nproc"]).get("stdout"), "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "nvidia_smi_L": _cmd(["nvidia-smi", "-L"]),
        "env": {k: env[k] for k in ENV_KEYS if k in env},
        "children": {}, "versions": {},
    }
    for mode in MODES:
        out = os.path.join(outdir, f"{mode}.json")
        t0 = time.monotonic()
        child = {"timeout_s": CHILD_TIMEOUT_S}
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), mode, out],
                               env=env, capture_output=True, text=True,
                               timeout=CHILD_TIMEOUT_S)
            child.update(rc=p.returncode, stderr_tail=p.stderr[-3000:],
                         stdout_tail=p.stdout[-1000:])
        except subprocess.TimeoutExpired as e:
            err = e.stderr or ""
            if isinstance(err, bytes):
                err = err.decode(errors="replace")
            child.update(rc=None, timed_out=True, stderr_tail=err[-3000:])
        child["seconds"] = round(time.monotonic() - t0, 2)
        meta["children"][mode] = child
        doc = None
        try:
            with open(out) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            doc = {"mode": mode, "error": f"no result file: {e}", "stages": []}
            _write_json(out, doc)
        for k, v in (doc.get("versions") or {}).items():
            if v and k not in meta["versions"]:
                meta["versions"][k] = v
        print(f"== {mode}: rc={child.get('rc')} {child['seconds']}s"
              + (" TIMED OUT" if child.get("timed_out") else ""), flush=True)
        for s in doc.get("stages", []):
            st = "ok" if s.get("ok") else "ERR " + (s.get("error") or "").splitlines()[0][:200]
            print(f"  {s['stage']}: total={s['total']} new={s['new']} gone={s['gone']} [{st}]",
                  flush=True)
        if doc.get("stages"):
            print(f"  final threads: {doc['stages'][-1]['threads']}", flush=True)
        _write_json(os.path.join(outdir, "meta.json"), meta)  # after each child: survives a kill
    print("meta:", json.dumps({k: meta[k] for k in ("date", "nproc", "versions")}),
          meta["nvidia_smi_L"].get("stdout") or meta["nvidia_smi_L"], flush=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in MODES + ("all",):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "all":
        return run_all(argv[2])
    return run_mode(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
