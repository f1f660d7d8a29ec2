"""The typer app: every command but `run` (cli/run_command.py, click alone). Each command's
flags go to its module in cli/, imported only when used, which makes a request of a use case
(launcher/usecases/) and prints the result; so `launcher --help` stays fast (no docker, jinja2
or yaml import), and the option texts list the registries' names from metadata alone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

os.environ.setdefault("TYPER_USE_RICH", "0")  # plain help; rich costs ~100 ms at start

import typer  # noqa: E402
import typer.core  # noqa: E402
import typer.main  # noqa: E402

# Plain help: rich costs ~100 ms at start, and typer < 0.21 escapes "[default: ...]" with it.
typer.core.HAS_RICH = typer.main.HAS_RICH = False

from launcher.cli import run_command  # noqa: E402
from launcher.cli.errors import run_guarded  # noqa: E402
from launcher.cli.run_command import (  # noqa: E402 - the texts run shares with the others
    ENV_HELP,
    FIT_HELP,
    FRAMEWORK_HELP,
    GPUS_HELP,
    PROFILE_HELP,
)
from launcher.usecases import names  # noqa: E402 - metadata only

RUNTIMES = " | ".join(names.runtimes())  # the engines, as the registry lists them
BACKENDS = " | ".join(names.backends())
TARGETS = " | ".join(names.render_targets())
FRAMEWORKS = "|".join(names.frameworks())


class LauncherGroup(typer.core.TyperGroup):
    """The typer-built commands, and `run` from cli/run_command.py (click alone, so that
    `launcher run` does not import typer), listed after `build`."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.add_command(run_command.run)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        names = [n for n in super().list_commands(ctx) if n != "run"]
        at = names.index("build") + 1 if "build" in names else len(names)
        return [*names[:at], "run", *names[at:]]


app = typer.Typer(
    cls=LauncherGroup,
    help="Run ML workloads (JAX, PyTorch, TensorFlow) inside correctly capped containers.\n\n"
    "A hardware profile is resolved against the host's real cgroup limits into thread, memory\n"
    "and allocator settings that are in place before Python starts.\n\n"
    "Start with `launcher doctor`, then `launcher plan --profile auto`.",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    suggest_commands=False,  # click says "Did you mean ...?" itself
    context_settings={"help_option_names": ["-h", "--help"]},
)
profiles_app = typer.Typer(help="List, show and validate hardware profiles.", no_args_is_help=True,
                           rich_markup_mode=None, suggest_commands=False)
app.add_typer(profiles_app, name="profiles")
jobs_app = typer.Typer(
    help="Chunked jobs: a command run once per chunk of items under a profile's caps, fanned "
         "out over GPUs (or CPU slots) by a pull queue, recorded in a ledger that survives "
         "Ctrl-C, kill -9 and reboots.", no_args_is_help=True, rich_markup_mode=None,
    suggest_commands=False)
app.add_typer(jobs_app, name="jobs")

HostRoot = Annotated[
    Path | None,
    typer.Option("--host-root", hidden=True, envvar="LAUNCHER_HOST_ROOT",
                 help="Read host facts from this tree instead of / (tests, captured hosts)."),
]
VisibleHostRoot = Annotated[
    Path | None,
    typer.Option("--host-root", envvar="LAUNCHER_HOST_ROOT", metavar="DIR",
                 help="Read host facts from a captured tree (`doctor --capture DIR`) instead "
                      "of this host."),
]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
ProfileOpt = Annotated[str, typer.Option("--profile", "-p", help=PROFILE_HELP)]
Framework = Annotated[str | None, typer.Option(
    "--framework", "-f", metavar=FRAMEWORKS, help=FRAMEWORK_HELP)]
EnvOpt = Annotated[list[str] | None, typer.Option("--env", "-e", help=ENV_HELP)]


def _run(fn) -> None:  # type: ignore[no-untyped-def]
    code = run_guarded(fn)
    if code:
        raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"launcher {version('launcher')}")
        except PackageNotFoundError:
            from launcher import __version__

            print(f"launcher {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print launcher's version and exit.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also print the notes that change nothing (how the runtime "
                                "was chosen, where each thread value came from, defaults "
                                "lowered to this host's limits).")] = False,
) -> None:
    """Run ML workloads (JAX, PyTorch, TensorFlow) inside correctly capped containers."""
    from launcher.cli.output import set_verbose

    set_verbose(verbose)


@profiles_app.command("list")
def profiles_list(json: Json = False) -> None:
    """List the profiles found (user folders first, then the shipped ones)."""
    from launcher.cli import profiles_cmd

    _run(lambda: profiles_cmd.list_profiles(json))


@profiles_app.command("show")
def profiles_show(name: str, json: Json = False) -> None:
    """Show a profile after `extends` is merged, with the file and line of every value."""
    from launcher.cli import profiles_cmd

    _run(lambda: profiles_cmd.show(name, json))


@profiles_app.command("validate")
def profiles_validate(files: Annotated[list[Path], typer.Argument(
        metavar="PROFILE...", help="Profile files, or names as --profile takes them.")],
        json: Json = False) -> None:
    """Check profiles; print one line per error, exit 1 if any is invalid.

    --json: a list of {"file", "ok", "error"} (error: the same one-line message, or null)."""
    from launcher.cli import profiles_cmd

    _run(lambda: profiles_cmd.validate(files, as_json=json))


@app.command()
def doctor(
    json: Json = False,
    profile: Annotated[str | None, typer.Option("--profile", "-p",
                                                   help="Also judge this profile here.")] = None,
    capture: Annotated[Path | None, typer.Option(
        "--capture", metavar="DIR",
        help="Copy the files the probe reads into DIR (for a bug report or a test fixture; "
             "read it back with --host-root DIR).")] = None,
    clean: Annotated[bool, typer.Option(
        "--clean", help="Remove what killed launcher runs left behind (containers, run "
                        "cgroups).")] = False,
    host_root: VisibleHostRoot = None,
) -> None:
    """Report this host's real limits (cgroup, rlimits, kernel, GPUs), the one that will bite
    first, stale thread variables inherited from the shell, and anything killed runs left."""
    from launcher.cli import doctor_cmd

    _run(lambda: doctor_cmd.doctor(json, profile, host_root, capture, clean))


Gpus = Annotated[str | None, typer.Option("--gpus", help=GPUS_HELP)]
FitOpt = Annotated[bool, typer.Option("--fit", help=FIT_HELP)]
DetailedExit = Annotated[bool, typer.Option(
    "--detailed-exitcode", help="Exit with the verdict, for scripts (as terraform's): 0 ok, "
                                "4 warn, 5 refuse; 1 stays a mistake, 2 a usage error.")]


@app.command()
def plan(
    *,
    profile: ProfileOpt = "auto",
    framework: Framework = None,
    processes: Annotated[int | None, typer.Option(
        "--processes", "-n", min=1,
        help="Processes sharing the budget (default: profile's).")] = None,
    env: EnvOpt = None,
    gpus: Gpus = None,
    workload: Annotated[str | None, typer.Option(
        "--workload", metavar="NAME",
        help="Budget for this workload as `launcher run NAME` does: its framework and its own "
             "threads (a driver, a sampler), so plan and run give the same verdict.")] = None,
    fit: FitOpt = False,
    detailed_exitcode: DetailedExit = False,
    json: Json = False,
    host_root: HostRoot = None,
) -> None:
    """Resolve a profile against this host: every variable with its source, the ulimits and
    container limits, the thread estimate, and a verdict (ok, warn, refuse). When the threads
    would not fit the pids budget, it names the largest pool size that does (--fit applies
    it)."""
    from launcher.cli import plan_cmd

    _run(lambda: plan_cmd.plan(profile, framework=framework, processes=processes,
                               env_pairs=env, gpus=gpus, workload=workload, as_json=json,
                               host_root=host_root, fit=fit, detailed=detailed_exitcode))
BaseImage = Annotated[str | None, typer.Option(
    "--base-image", help="Base image instead of the profile's or the vendor default.")]
CaCert = Annotated[Path | None, typer.Option(
    "--ca-cert", help="Extra CA certificate (PEM) trusted by apt, pip and Python in the build.")]
Tag = Annotated[str | None, typer.Option(
    "--image", "--tag", "-t", help="Image name, e.g. REGISTRY/NAME:TAG for a cloud pod to pull "
                                  "(default launcher/PROFILE:FRAMEWORK, a local tag).")]


@app.command()
def render(
    *,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the files into.")],
    profile: ProfileOpt = "auto",
    framework: Framework = None,
    base_image: BaseImage = None,
    ca_cert: CaCert = None,
    tag: Tag = None,
    gpus: Gpus = None,
    env: EnvOpt = None,
    command: Annotated[str | None, typer.Option(
        "--command", help="Start command for compose and RunPod (shell-style words).")] = None,
    workload: Annotated[str | None, typer.Option(
        "--workload", help="Run a built-in workload instead, e.g. 'stress-jax --phase 1' "
                           "(results in ./runs beside compose.yaml, /workspace/runs on "
                           "RunPod).")] = None,
    volume: Annotated[list[str] | None, typer.Option(
        "--volume", "-v", help="SRC:DST[:ro] for the compose services. Repeatable.")] = None,
    workdir: Annotated[str | None, typer.Option(
        "--workdir", "-w", help="Working directory of the compose services.")] = None,
    user: Annotated[str | None, typer.Option(
        "--user", help="UID[:GID] of the compose services.")] = None,
    port: Annotated[list[str] | None, typer.Option(
        "--port", help="A port the RunPod pod exposes, e.g. 8888/http. Repeatable.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace files in --out that launcher did not write.")] = False,
    json: Json = False,
    host_root: HostRoot = None,
) -> None:
    """Write the Dockerfile, entrypoint, compose.yaml (one service per GPU where the profile
    runs a process per GPU, else one seeing them all; each with its CPUs and memory), the
    RunPod template and the caps into a folder you can read, commit and `docker build`."""
    from launcher.cli import render_cmd

    _run(lambda: render_cmd.render(
        profile=profile, framework=framework, out=out, base_image=base_image, ca_cert=ca_cert,
        tag=tag, gpus=gpus, env=env, host_root=host_root, as_json=json, command=command,
        workload=workload, volumes=volume, workdir=workdir, user=user, ports=port,
        force=force))


@app.command()
def build(
    *,
    profile: ProfileOpt = "auto",
    framework: Framework = None,
    base_image: BaseImage = None,
    tag: Tag = None,
    ca_cert: CaCert = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
    push: Annotated[bool, typer.Option(
        "--push", help="Push the image to its registry after the build (name it with "
                       "--image REGISTRY/NAME:TAG).")] = False,
    host_root: HostRoot = None,
) -> None:
    """Build an image that carries the profile's caps in its entrypoint (it applies them even
    under a bare `docker run` or on RunPod), with live progress."""
    from launcher.cli import build_cmd

    _run(lambda: build_cmd.build(profile=profile, framework=framework, base_image=base_image,
                                 tag=tag, ca_cert=ca_cert, host_root=host_root,
                                 no_cache=no_cache, push=push))


@app.command()
def examples(
    names: Annotated[list[str] | None, typer.Argument(
        metavar="[NAME]...", help="Only these (default: all).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="DIR",
        help="Write them into DIR (each example a folder; the recipe a file).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace what is already in DIR under the same names.")] = False,
    json: Json = False,
) -> None:
    """List the example jobs and the base image recipe shipped with launcher, or write them
    out (`launcher examples --out . score-survivors`; `launcher examples --out . base-image.sh`
    then `bash base-image.sh` builds launcher-base:bookworm with no registry)."""
    from launcher.cli import examples_cmd

    _run(lambda: examples_cmd.examples(out, names or [], json, force))


@app.command()
def workloads(json: Json = False) -> None:
    """List the workloads `launcher run` knows: built-in and user YAML ones."""
    from launcher.cli import workloads_cmd

    _run(lambda: workloads_cmd.list_workloads(json))


@app.command()
def report(
    run_dir: Path,
    json: Json = False,
    plot: Annotated[bool, typer.Option(
        "--plot", help="Draw telemetry.png now if it is not there.")] = False,
    profile: Annotated[str | None, typer.Option(
        "--profile", "-p", help="Replay the run against this profile's limits (pids, memory, "
        "nofile): would it have died there, in which cycle, of what?")] = None,
) -> None:
    """Print a run's summary: peaks against limits, estimated against observed threads,
    headroom, growth per cycle with its projection and thread census, exit status and
    diagnosis. With --profile, what the run would have met under another profile's limits."""
    from launcher.cli import report_cmd

    _run(lambda: report_cmd.report(run_dir, json, plot, profile))


JobProfile = Annotated[str | None, typer.Option(
    "--profile", "-p", help="Profile name or path (default: the spec's `profile`).")]
MaxConcurrent = Annotated[int | None, typer.Option(
    "--max-concurrent", min=1, help="At most this many chunks at once (a cap: the GPUs, the "
                                    "memory and the pids budget still bound it).")]


@jobs_app.command("plan")
def jobs_plan(
    *,
    spec: Annotated[Path, typer.Argument(help="The job spec (YAML).")],
    profile: JobProfile = None,
    framework: Framework = None,
    max_concurrent: MaxConcurrent = None,
    gpus: Gpus = None,
    env: EnvOpt = None,
    detailed_exitcode: DetailedExit = False,
    json: Json = False,
    host_root: HostRoot = None,
) -> None:
    """How the job is cut and how many chunks run at once, and which bound decides: GPU
    slots, memory (usable x safety / workers.memory), the profile's cap, the pids budget."""
    from launcher.cli import jobs_cmd

    _run(lambda: jobs_cmd.plan(spec, profile=profile, framework=framework,
                               max_concurrent=max_concurrent, env=env, as_json=json,
                               host_root=host_root, gpus=gpus, detailed=detailed_exitcode))


@jobs_app.command("run")
def jobs_run(
    *,
    spec: Annotated[Path, typer.Argument(help="The job spec (YAML).")],
    profile: JobProfile = None,
    framework: Framework = None,
    max_concurrent: MaxConcurrent = None,
    gpus: Gpus = None,
    env: EnvOpt = None,
    runtime: Annotated[str, typer.Option(
        "--runtime", help=f"{RUNTIMES}: native runs a fresh process per chunk, the others a "
                          "container per chunk")] = "native",
    image: Annotated[str | None, typer.Option(
        "--image", help="Image for a container runtime (default: the spec's, else "
                        "launcher/PROFILE:FRAMEWORK).")] = None,
    backend: Annotated[str, typer.Option(
        "--backend", help=f"Where the chunks run: {BACKENDS} (local: this machine; the "
                          "others: a cluster's nodes).")] = "local",
    address: Annotated[str | None, typer.Option(
        "--address", envvar="RAY_ADDRESS", help="Ray cluster address (--backend ray).")] = None,
    backend_option: Annotated[list[str] | None, typer.Option(
        "--backend-option", metavar="KEY=VALUE", help="An option the backend declares, e.g. "
        "for slurm: partition, account, time, sbatch_args (repeat it).")] = None,
    json: Json = False,
    host_root: HostRoot = None,
) -> None:
    """Run the chunks not finished yet: each in a fresh process or container under the caps,
    one GPU and its own memory limit each; an OOM-killed chunk is split in half and retried.
    Rerun the same command after Ctrl-C, kill -9 or a reboot to go on."""
    from launcher.cli import jobs_cmd

    _run(lambda: jobs_cmd.run(spec, profile=profile, framework=framework,
                              max_concurrent=max_concurrent, env=env, runtime=runtime,
                              image=image, backend=backend, address=address, as_json=json,
                              host_root=host_root, gpus=gpus, backend_options=backend_option))


@jobs_app.command("render")
def jobs_render(
    *,
    spec: Annotated[Path, typer.Argument(help="The job spec (YAML).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the manifest into.")],
    target: Annotated[str, typer.Option(
        "--target", help=f"What to render the job as: {TARGETS}.")] = "k8s",
    profile: JobProfile = None,
    image: Annotated[str | None, typer.Option(
        "--image", help="The image the pods pull, pushed (REGISTRY/NAME:TAG): launcher's "
                        "image with the job's folder (the Dockerfile this writes); needed by "
                        "--target k8s unless the spec names one.")] = None,
    workdir: Annotated[str, typer.Option(
        "--workdir", help="The worker's folder in the image.")] = "/workspace",
    max_concurrent: MaxConcurrent = None,
    gpus: Gpus = None,
    claim: Annotated[str | None, typer.Option(
        "--claim", help="An existing PersistentVolumeClaim for the results (default: the "
                        "render writes one, JOB-results).")] = None,
    claim_size: Annotated[str | None, typer.Option(
        "--claim-size", help="Size of the claim the render writes (default 10GiB).")] = None,
    base_image: Annotated[str | None, typer.Option(
        "--base-image", help="launcher's image the job's image starts FROM (default "
                             "launcher/PROFILE:FRAMEWORK, from `launcher build`).")] = None,
    json: Json = False,
    host_root: HostRoot = None,
) -> None:
    """Write the job as a Kubernetes Indexed Job (completions = chunks, parallelism = the cap,
    the chunk from JOB_COMPLETION_INDEX, GPU and memory limits, /dev/shm, per-index backoff,
    a pod failure policy, results on a PersistentVolumeClaim) and the Dockerfile of its image
    (launcher's image plus the job's folder)."""
    from launcher.cli import jobs_cmd

    _run(lambda: jobs_cmd.render(spec, target=target, out=out, profile=profile, image=image,
                                 max_concurrent=max_concurrent, gpus=gpus, workdir=workdir,
                                 host_root=host_root, as_json=json, claim=claim,
                                 claim_size=claim_size, base_image=base_image))


@jobs_app.command("ray-node")
def jobs_ray_node(
    profile: ProfileOpt = "auto",
    address: Annotated[str | None, typer.Option(
        "--address", help="The head's HOST:PORT (none: start a head).")] = None,
    gpus: Gpus = None,
    json: Json = False,
    host_root: HostRoot = None,
) -> None:
    """Print the `ray start` command that declares this node's GPUs, memory and cap (the
    `launcher_slot` resource each chunk takes one unit of) from its profile."""
    from launcher.cli import jobs_cmd

    _run(lambda: jobs_cmd.ray_node(profile, address, gpus, host_root, json))


@jobs_app.command("status")
def jobs_status(
    target: Annotated[Path, typer.Argument(help="The job's folder, or its spec.")],
    json: Json = False,
) -> None:
    """Chunks done, pending, running (where, for how long), failed (why) and split."""
    from launcher.cli import jobs_cmd

    _run(lambda: jobs_cmd.status(target, json))


@app.command()
def calibrate(
    framework: Annotated[list[str] | None, typer.Option(
        "--framework", "-f", metavar=FRAMEWORKS,
        help="A framework to measure (default: every one installed). Repeatable.")] = None,
    cpus: Annotated[str | None, typer.Option(
        "--cpus", help="CPU counts to measure at, e.g. 1,2 (default: 1, 2, 4 ... all)."
    )] = None,
    no_gpu: Annotated[bool, typer.Option(
        "--no-gpu", help="Measure with no GPU visible only (by default a host with a GPU is "
                         "measured again with one visible: the GPU side).")] = False,
    json: Json = False,
) -> None:
    """Measure each framework's peak thread count on this host (start, import, compiled
    training steps) at several CPU counts, with no GPU visible and with one GPU visible where
    the host has one, for `plan` and `run` to budget with."""
    from launcher.cli import calibrate_cmd

    _run(lambda: calibrate_cmd.calibrate(framework, cpus, json, no_gpu=no_gpu))


@app.command("bench-memory")
def bench_memory(
    *,
    spec: Annotated[Path, typer.Argument(help="The job spec (YAML) whose worker to measure.")],
    sizes: Annotated[str, typer.Option(
        "--sizes", help="Chunk sizes to run the worker at, e.g. 500,1000,2000.")],
    profile: JobProfile = None,
    predict: Annotated[int | None, typer.Option(
        "--predict", min=1, help="Also predict the peak at this many items.")] = None,
    concurrent: Annotated[int | None, typer.Option(
        "--concurrent", min=2, help="Also run this many workers at once (peaks are not "
                                    "additive).")] = None,
    write_profile: Annotated[Path | None, typer.Option(
        "--write-profile", help="Write a profile (FILE.yaml) extending --profile with "
                                "workers.memory and jobs.chunk_size (no jobs.max_concurrent: "
                                "`jobs plan` works it out on the machine that runs the job).")
    ] = None,
    gpus: Gpus = None,
    env: EnvOpt = None,
    json: Json = False,
    host_root: HostRoot = None,
) -> None:
    """Measure a job's real worker (framework and GPU init included) at several chunk sizes,
    each in its own capped cgroup; fit peak = base + per_item x size and report its error."""
    from launcher.cli import bench_cmd

    _run(lambda: bench_cmd.bench(spec, profile=profile, sizes_text=sizes, predict=predict,
                                 concurrent=concurrent, write_profile=write_profile, env=env,
                                 as_json=json, host_root=host_root, gpus=gpus))


def main() -> None:
    """Every command line but `launcher run ...`, which cli/entry.py gives to its click
    command without this module's typer import."""
    import sys

    only_invoked(sys.argv[1:2])
    app()


def only_invoked(first: list[str]) -> None:
    """Where the first word names a typer command, click is given that command alone:
    building all of them costs ~20 ms of a start. Anything else (no word, an option, a group
    such as `jobs`, `run` reached through `python -m launcher.cli.main`, a typo) gets them all,
    for the list, --help and the did-you-mean."""
    from typer.main import get_command_name

    chosen = [c for c in app.registered_commands
              if first and (c.name or get_command_name(c.callback.__name__)) == first[0]]
    if chosen:
        app.registered_commands = chosen
        app.registered_groups = []


if __name__ == "__main__":
    main()
