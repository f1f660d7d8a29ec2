"""stress-jax: find the largest stable JAX configuration for this hardware (report 002).

Phase 1 rolls out N vectorised cart-pole environments (physics in jax.numpy, `vmap` over
environments, `lax.scan` over steps). Phase 2 adds a policy network trained with `jax.grad`
(REINFORCE) on the rollouts. num_envs is swept over a search space that adapts to the pids and
memory limits: a configuration whose estimated memory would not fit, or that would bring the
threads near pids.max, is not run. Reports steps/s, compile time, peak threads and peak RSS per
run, and writes the recommended configuration.

    python -m launcher.workloads.stress_jax --phase 1|2 [--max-runs N] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from launcher.keys import Key
from launcher.workloads.common import (
    at_least,
    describe_limits,
    env_int,
    limits,
    out_dir,
    peak_rss,
    threads_now,
    write_json,
)
from launcher.workloads.workload import Workload


def threads_would_pass(runs: list[dict[str, Any]], lim: dict[str, int | None],
                       threads: int) -> str | None:
    """Why the next configuration is not run: its threads, the last one's peak grown by the
    most seen from one configuration to the next (at least 2), would not fit under pids.max
    beside the cgroup's other tasks; None when they fit. (XLA's pools follow the CPUs, not
    num_envs: a budget set to launcher's estimate fits every configuration.)"""
    if not lim["pids_max"] or not runs:
        return None
    room = lim["pids_max"] - (lim["pids_current"] or threads) + threads
    peaks = [r["peak_threads"] for r in runs]
    grow = max([2, *(b - a for a, b in zip(peaks, peaks[1:]))])
    if peaks[-1] + grow <= room:
        return None
    return (f"threads ({peaks[-1]}, + up to {grow} more) would not fit the {room} that "
            f"pids.max {lim['pids_max']} leaves this process")


GRAVITY, CART, POLE, LENGTH, FORCE, DT = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02


class ThreadPeak(threading.Thread):
    """Samples this process's thread count while a configuration runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.done = threads_now(), threading.Event()
        self.interval = 0.002  # compilation's bursts last milliseconds; 0.05 once it is timed

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.peak = max(self.peak, threads_now())

    def stop(self) -> int:
        self.done.set()
        self.join()
        return max(self.peak - 1, 1)  # not counting this sampler


def build(phase: int, steps: int):  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp

    def physics(state, action):  # type: ignore[no-untyped-def]
        x, x_dot, th, th_dot = state
        force = jnp.where(action > 0, FORCE, -FORCE)
        cos, sin = jnp.cos(th), jnp.sin(th)
        temp = (force + POLE * LENGTH * th_dot**2 * sin) / (CART + POLE)
        th_acc = (GRAVITY * sin - cos * temp) / (
            LENGTH * (4.0 / 3.0 - POLE * cos**2 / (CART + POLE)))
        x_acc = temp - POLE * LENGTH * th_acc * cos / (CART + POLE)
        new = jnp.stack([x + DT * x_dot, x_dot + DT * x_acc, th + DT * th_dot,
                         th_dot + DT * th_acc])
        alive = (jnp.abs(new[0]) < 2.4) & (jnp.abs(new[2]) < 0.21)
        return new, alive.astype(jnp.float32)

    def policy_logit(params, obs):  # type: ignore[no-untyped-def]
        h = jnp.tanh(obs @ params["w1"] + params["b1"])
        return (h @ params["w2"] + params["b2"])[0]

    def episode(params, key):  # type: ignore[no-untyped-def]
        state = jax.random.uniform(key, (4,), minval=-0.05, maxval=0.05)

        def step(carry, k):  # type: ignore[no-untyped-def]
            s, alive = carry
            logit = policy_logit(params, s) if phase == 2 else 0.0
            p = jax.nn.sigmoid(logit)
            action = jax.random.bernoulli(k, p)
            logp = jnp.where(action, jnp.log(p + 1e-8), jnp.log(1 - p + 1e-8))
            s2, ok = physics(s, action)
            reward = alive * ok
            return (s2, alive * ok), (reward, logp * alive)

        _, (rewards, logps) = jax.lax.scan(step, (state, 1.0), jax.random.split(key, steps))
        return rewards.sum(), logps.sum()

    def rollout(params, key, num_envs):  # type: ignore[no-untyped-def]
        keys = jax.random.split(key, num_envs)
        return jax.vmap(episode, in_axes=(None, 0))(params, keys)

    def loss(params, key, num_envs):  # type: ignore[no-untyped-def]
        returns, logps = rollout(params, key, num_envs)
        adv = jax.lax.stop_gradient(returns - returns.mean())
        return -(adv * logps).mean(), returns.mean()

    if phase == 1:
        fn = jax.jit(lambda params, key, n: rollout(params, key, n)[0].mean(),
                     static_argnums=2)
    else:
        grad = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=2)

        def fn(params, key, n):  # type: ignore[no-untyped-def]
            (_, ret), g = grad(params, key, n)
            for name in params:
                params[name] = params[name] - 0.01 * g[name]
            return ret
    return fn


def init_params():  # type: ignore[no-untyped-def]
    import jax

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return {"w1": jax.random.normal(k1, (4, 32)) * 0.1, "b1": jax.numpy.zeros(32),
            "w2": jax.random.normal(k2, (32, 1)) * 0.1, "b2": jax.numpy.zeros(1)}


def bytes_per_env(steps: int, phase: int) -> int:
    """Rough working set of one environment: scan outputs, state, and (phase 2) gradients."""
    return steps * 4 * (3 if phase == 1 else 12) + 2048


def search_space(quick: bool) -> list[int]:
    return [64, 128, 256, 512, 1024] if quick else [512, 1024, 2048, 4096, 8192, 16384]


WORKLOAD = Workload(
    name="stress-jax",
    description="JAX environment stress test: largest stable num_envs for this hardware",
    framework="jax", module=__name__, extra_threads=1,  # its thread sampler
    profile_keys={"recommended": {"num_envs": Key(
        "int", "stress-jax: the environments it runs by default, `LAUNCHER_NUM_ENVS` (written "
               "by `launcher run stress-jax --write-profile`)")}},
    variables={"LAUNCHER_NUM_ENVS": "stress-jax: num_envs to run when no flag is given"},
    from_keys={"recommended.num_envs": "LAUNCHER_NUM_ENVS"})


def parser() -> argparse.ArgumentParser:
    """The workload's flags: the one source for `launcher workloads`, --help and the docs."""
    ap = argparse.ArgumentParser(prog="stress-jax", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", type=int, choices=(1, 2), default=1,
                    help="1: rollouts (vmap over envs, lax.scan over steps); 2: + a policy "
                         "trained with jax.grad")
    ap.add_argument("--max-runs", type=at_least(1), default=None, metavar="N",
                    help="configurations to try")
    ap.add_argument("--quick", action="store_true", help="small sizes for a 2-core machine")
    ap.add_argument("--steps", type=at_least(1), default=None, metavar="N",
                    help="steps per episode (default 500; 50 with --quick)")
    ap.add_argument("--out", metavar="DIR", help="results folder (default: this run's folder)")
    ap.add_argument("--num-envs", type=at_least(1), metavar="N",
                    default=env_int("LAUNCHER_NUM_ENVS", 0) or None,
                    help="run this num_envs only (default: the profile's recommended.num_envs, "
                         "else the sweep)")
    return ap


def recommended_line(runs: list[dict[str, Any]]) -> str:
    """`recommended num_envs N (why)`: the largest num_envs that ran within the limits (the
    sweep rises, so the last run), and, when another ran faster, how it compares to that one."""
    if not runs:
        return "no configuration ran within the limits"
    largest, best = runs[-1], max(runs, key=lambda r: r["steps_per_s"])
    n = largest["num_envs"]
    if len(runs) == 1:
        return f"recommended num_envs {n} (the only one run)"
    if largest["steps_per_s"] >= best["steps_per_s"]:  # a tie counts as the fastest
        return f"recommended num_envs {n} (the fastest)"
    share = largest["steps_per_s"] / best["steps_per_s"]
    return (f"recommended num_envs {n} (the largest that ran within the limits, at {share:.0%} "
            f"of the fastest, {best['num_envs']}: {largest['steps_per_s']:,} vs "
            f"{best['steps_per_s']:,} steps/s)")


def recommendation(result_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """What a run found, for a profile's `recommended` section, and the lines that say why."""
    import json

    files = sorted(result_dir.glob("phase*.json"), key=lambda f: f.stat().st_mtime)  # this run
    if not files:
        raise FileNotFoundError(f"no stress-jax results in {result_dir}")
    r = json.loads(files[-1].read_text())
    n = r["recommended"]["num_envs"]
    if n is None:
        raise ValueError("stress-jax ran no configuration within the limits")
    ran = ", ".join(f"{x['num_envs']} ({x['steps_per_s']:,} steps/s, {x['peak_threads']} "
                    f"threads)" for x in r["runs"])
    why = f"; stopped: {r['stopped']}" if r.get("stopped") else ""
    return {"num_envs": n}, [f"recommended.num_envs: the largest that ran within the limits "
                             f"in stress-jax phase {r['phase']} (num_envs {ran}{why})."]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    steps = args.steps or (50 if args.quick else 500)
    space = [args.num_envs] if args.num_envs else search_space(args.quick)[: args.max_runs]
    import jax

    lim = limits()
    print(f"stress-jax phase {args.phase}: num_envs {space}, {steps} steps, "
          f"jax {jax.__version__} on {jax.default_backend()}; {describe_limits(lim)}", flush=True)
    fn, params = build(args.phase, steps), init_params()
    runs: list[dict[str, Any]] = []
    stopped = None
    for i, n in enumerate(space, 1):
        print(f"  cycle {i}/{len(space)}: num_envs {n}", flush=True)  # launcher's growth unit
        lim = limits()
        need = n * bytes_per_env(steps, args.phase) * 4  # x4: XLA buffers and copies
        if lim["memory_limit"] and lim["memory_usage"] is not None:
            left = lim["memory_limit"] - lim["memory_usage"]
            if need > 0.5 * left:
                stopped = (f"num_envs={n} would need ~{need >> 20} MiB of the "
                           f"{left >> 20} MiB left under the memory limit")
                break
        stopped = threads_would_pass(runs, lim, threads_now())
        if stopped:
            break
        peak = ThreadPeak()
        peak.start()
        key = jax.random.PRNGKey(n)
        t0 = time.perf_counter()
        jax.block_until_ready(fn(params, key, n))
        compile_s = time.perf_counter() - t0
        peak.interval = 0.05  # the timed calls: a sampler every 2 ms would cost them CPU
        # at least 3 calls and 0.3 s of them: a few 1 ms calls measure only noise
        iters, t1, ret = 0, time.perf_counter(), None
        while iters < 3 or time.perf_counter() - t1 < 0.3:
            ret = jax.block_until_ready(fn(params, jax.random.fold_in(key, iters), n))
            iters += 1
        run_s = time.perf_counter() - t1
        row = {"num_envs": n, "steps": steps, "compile_s": round(compile_s, 3),
               "steps_per_s": round(n * steps * iters / run_s), "mean_return": float(ret),
               "peak_threads": peak.stop(), "peak_rss": peak_rss()}
        runs.append(row)
        print(f"  num_envs {n:6d}: {row['steps_per_s']:>12,} steps/s, compile "
              f"{row['compile_s']:.2f}s, {row['peak_threads']} threads, peak RSS "
              f"{row['peak_rss'] >> 20} MiB, mean return {row['mean_return']:.1f}", flush=True)
    if stopped:
        print(f"  stopped before breaking a limit: {stopped}", flush=True)
    best = max(runs, key=lambda r: r["steps_per_s"]) if runs else None
    largest = runs[-1] if runs else None
    result = {"phase": args.phase, "runs": runs, "stopped": stopped, "limits": lim,
              "recommended": {"num_envs": largest["num_envs"] if largest else None,
                              "fastest_num_envs": best["num_envs"] if best else None,
                              "reason": "largest configuration that ran within the limits"}}
    out = out_dir(args.out, "stress-jax")
    write_json(out / f"phase{args.phase}.json", result)
    print(f"stress-jax: {recommended_line(runs)}; written to {out}/phase{args.phase}.json",
          flush=True)
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
