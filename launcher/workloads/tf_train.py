"""tf-train: TensorFlow k-fold training, each fold in a fresh process.

TF and CUDA leak memory maps (~730 per fold) and RSS (~550 MB per fold) that no cleanup frees
(report 001), so the driver never imports TensorFlow: it starts one process per fold, saves
each fold's metrics when it ends, and a rerun in the same folder (`--out`, or `launcher run
--resume RUN_ID`) resumes after the last finished fold.

    python -m launcher.workloads.tf_train --folds 3 [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from launcher.workloads.common import (
    at_least,
    env_int,
    out_dir,
    peak_rss,
    threads_now,
    write_json,
)
from launcher.workloads.workload import Workload


def config_of(args: argparse.Namespace) -> dict:  # type: ignore[type-arg]
    n = 600 if args.quick else 20000
    return {"folds": args.folds, "samples": n, "features": 16 if args.quick else 64,
            "epochs": 5 if args.quick else 10, "batch": 32 if args.quick else 128, "seed": 7}


def driver(args: argparse.Namespace) -> int:
    out = out_dir(args.out, "tf-train")
    config = config_of(args)
    cfg_file = out / "config.json"
    if cfg_file.exists() and json.loads(cfg_file.read_text()) != config:
        stale = out / f"previous-{int(time.time())}"
        stale.mkdir()
        for f in out.glob("*.json"):
            f.rename(stale / f.name)
        print(f"tf-train: configuration changed; earlier results moved to {stale}", flush=True)
    write_json(cfg_file, config)
    current: list[subprocess.Popen] = []  # the fold running now
    stopped: list[int] = []  # a stop signal received: no fold starts after it

    def stop(signum: int, _frame: object) -> None:
        stopped.append(signum)
        if current:
            current[-1].send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    for fold in range(1, args.folds + 1):
        result = out / f"fold-{fold}.json"
        if result.exists():
            done = json.loads(result.read_text())
            print(f"tf-train: fold {fold}/{args.folds} already done (pid {done['pid']}); "
                  f"skipping", flush=True)
            continue
        print(f"tf-train: fold {fold}/{args.folds} in a fresh process", flush=True)
        cmd = [sys.executable, "-m", "launcher.workloads.tf_train", "--fold-worker", str(fold),
               "--folds", str(args.folds), "--out", str(out)] + (["--quick"] if args.quick
                                                                  else [])
        if stopped:  # between two folds: the next never starts
            print(f"tf-train: stopped before fold {fold}; rerun to resume from it", flush=True)
            return 128 + stopped[0]
        child = subprocess.Popen(cmd, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        current.append(child)
        code = child.wait()
        if code != 0:
            print(f"tf-train: fold {fold} ended with status {code}; rerun to resume from it",
                  flush=True)
            return 128 - code if code < 0 else code
    folds = [json.loads((out / f"fold-{i}.json").read_text())
             for i in range(1, args.folds + 1)]
    acc = [f["val_accuracy"] for f in folds]
    mean = sum(acc) / len(acc)
    std = (sum((a - mean) ** 2 for a in acc) / len(acc)) ** 0.5
    agg = {"folds": len(folds), "val_accuracy_mean": mean, "val_accuracy_std": std,
           "val_loss_mean": sum(f["val_loss"] for f in folds) / len(folds),
           "pids": [f["pid"] for f in folds], "peak_threads": max(f["threads"] for f in folds)}
    write_json(out / "aggregate.json", agg)
    print(f"tf-train: {len(folds)} folds, val accuracy {mean:.3f} +/- {std:.3f} "
          f"(pids {agg['pids']})", flush=True)
    return 0


def fold_worker(args: argparse.Namespace) -> int:
    import numpy as np
    import tensorflow as tf

    cfg = config_of(args)
    fold, k = args.fold_worker, cfg["folds"]
    started = time.time()
    rng = np.random.default_rng(cfg["seed"])
    x = rng.normal(size=(cfg["samples"], cfg["features"])).astype("float32")
    w = rng.normal(size=(cfg["features"],)).astype("float32")
    y = ((x @ w + 0.5 * rng.normal(size=cfg["samples"])) > 0).astype("float32")
    idx = np.arange(cfg["samples"]) % k
    train, val = idx != (fold - 1), idx == (fold - 1)

    parallel = env_int("LAUNCHER_TF_DATA_PARALLELISM", 1)
    prefetch = env_int("LAUNCHER_TF_DATA_PREFETCH", 2)
    options = tf.data.Options()
    options.threading.private_threadpool_size = env_int("LAUNCHER_TF_DATA_PRIVATE_THREADPOOL",
                                                        parallel)
    options.threading.max_intra_op_parallelism = 1

    def pipeline(xs: np.ndarray, ys: np.ndarray, shuffle: bool) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((xs, ys))
        if shuffle:
            ds = ds.shuffle(len(xs), seed=cfg["seed"])
        ds = ds.map(lambda a, b: (a * 1.0, b), num_parallel_calls=parallel)
        return ds.batch(cfg["batch"]).prefetch(prefetch).with_options(options)

    model = tf.keras.Sequential([tf.keras.Input((cfg["features"],)),
                                 tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    # the pipeline shuffles; Keras's own shuffle (on by default) does not apply to a Dataset
    model.fit(pipeline(x[train], y[train], True), epochs=cfg["epochs"], shuffle=False,
              verbose=0)
    loss, acc = model.evaluate(pipeline(x[val], y[val], False), verbose=0)
    result = {"fold": fold, "pid": os.getpid(), "val_loss": float(loss),
              "val_accuracy": float(acc), "threads": threads_now(), "peak_rss": peak_rss(),
              "seconds": round(time.time() - started, 2),
              "tf_data": {"parallelism": parallel, "prefetch": prefetch}}
    write_json(Path(args.out) / f"fold-{fold}.json", result)
    print(f"tf-train: fold {fold}: val accuracy {acc:.3f}, loss {loss:.3f}, "
          f"{result['threads']} threads, pid {result['pid']}", flush=True)
    return 0


WORKLOAD = Workload(
    name="tf-train",
    description="TensorFlow k-fold training, one fresh process per fold, resumable",
    framework="tf", module=__name__, extra_threads=1)  # the driver (no TF) beside a fold


def parser() -> argparse.ArgumentParser:
    """The workload's flags: the one source for `launcher workloads`, --help and the docs."""
    ap = argparse.ArgumentParser(prog="tf-train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folds", type=at_least(2), default=3, metavar="K",
                    help="folds, at least 2 (default 3)")
    ap.add_argument("--quick", action="store_true", help="small data and model")
    ap.add_argument("--out", metavar="DIR",
                    help="results folder (default: this run's folder; the same --out, or "
                         "`launcher run --resume RUN_ID`, resumes)")
    ap.add_argument("--fold-worker", type=at_least(1), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return fold_worker(args) if args.fold_worker else driver(args)


if __name__ == "__main__":
    sys.exit(main())
