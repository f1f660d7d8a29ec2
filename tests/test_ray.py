"""Jobs on a real local Ray cluster (issue 9): three nodes declaring 2, 12 and 12 GPUs with
caps 2, 4 and 12 (their `launcher_slot` resource), the seed-004 job over all of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HOSTS, ROOT, need
from tests.docker_helpers import (
    BASE,
    PY,
    WORKER,
    assert_chunk_watched,
    covered_once,
    in_process,
    kill_9_after,
    launcher,
    leak_chunk_job,
    ledger_rows,
    make_job,
    max_overlap,
    profile,
)

CAPS = {"zeus": (2, 2), "rig-a": (12, 4), "rig-b": (12, 12)}  # node -> (GPUs, cap)


def _need_ray():  # type: ignore[no-untyped-def]
    try:
        import ray  # noqa: F401
        from ray.cluster_utils import Cluster
    except ImportError as exc:
        need("Ray", f"{exc} (scripts/test.sh: pip install -e '.[ray]')")
    return Cluster


@pytest.fixture(scope="module")
def cluster():
    Cluster = _need_ray()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0,
                                                      "include_dashboard": False})
    nodes = {}
    for name, (gpus, cap) in CAPS.items():
        node = c.add_node(num_cpus=cap, num_gpus=gpus,
                          resources={"launcher_slot": cap, f"node-{name}": 1})
        nodes[node.node_id] = name
    c.wait_for_nodes()
    yield c.address, nodes
    c.shutdown()


RAY_WORKER = WORKER.replace('"LAUNCHER_JOB_ID")}', '"LAUNCHER_JOB_ID", "LAUNCHER_NODE", '
                            '"MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",'
                            ' "OMP_STACKSIZE", "HSA_OVERRIDE_GFX_VERSION", "PYTORCH_HIP_ALLOC_CONF"'
                            ')}').replace("json.dump(rec", """\
if os.environ.get("LAUNCHER_CHUNK_FILE"):
    lines = open(os.environ["LAUNCHER_CHUNK_FILE"]).read().split()
    rec.update(first=lines[0], last=lines[-1], n=len(lines))
json.dump(rec""")


def _job(tmp_path: Path, seconds: str = "0.5", from_file: bool = False) -> tuple[Path, Path]:
    prof = Path(profile(tmp_path, "rig", "extends: rig-6600\nworkers: {memory: 300MiB}\n"))
    items = "98172"
    if from_file:
        (tmp_path / "items.txt").write_text("".join(f"item-{i}\n" for i in range(98172)))
        items = "{file: items.txt}"
    spec = make_job(tmp_path, f"name: seed004\ncommand: [{PY}, worker.py, '{seconds}', "
                              f"'{{start}}']\nitems: {items}\nchunk_size: 1000\noutput: out\n"
                              f"env: {{MARKS: {tmp_path}/marks}}\n", RAY_WORKER)
    return spec, prof


def test_seed_004_over_three_ray_nodes_each_under_its_cap(cluster, tmp_path):
    address, nodes = cluster
    spec, prof = _job(tmp_path, from_file=True)
    # the driver is this machine, with no GPU: the GPUs are the nodes' (Ray's num_gpus)
    proc = launcher("jobs", "run", str(spec), "-p", str(prof), "--backend", "ray",
                    "--address", address, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    assert "Ray: 18 slots" in proc.stderr
    rows = ledger_rows(tmp_path / "out")
    assert len(rows) == 99 and {r["state"] for r in rows} == {"done"}
    assert covered_once([(r["start_item"], r["end_item"]) for r in rows], 98172)
    markers = [json.loads((tmp_path / "out/chunks" / f"{r['id']:05d}/out/marker.json")
                          .read_text()) for r in rows]
    finished = (tmp_path / "marks/finished.log").read_text().split()
    assert len(finished) == len(set(finished)) == 99
    # each node committed its chunk's output: out with _SUCCESS, no attempt folder left
    assert len(list((tmp_path / "out/chunks").glob("*/out/_SUCCESS"))) == 99
    assert not list((tmp_path / "out/chunks").glob("*/attempt-*"))
    by_node: dict[str, list[tuple[float, float]]] = {}
    for m in markers:
        by_node.setdefault(nodes[m["LAUNCHER_NODE"]], []).append((m["t0"], m["t1"]))
    assert set(by_node) == set(CAPS)  # every node took chunks
    for name, spans in by_node.items():
        assert max_overlap(spans) <= CAPS[name][1], name  # no node beyond its own cap
    for m in markers:  # every managed variable, not only OMP_NUM_THREADS
        assert (m["OMP_NUM_THREADS"], m["MKL_NUM_THREADS"], m["OPENBLAS_NUM_THREADS"],
                m["TF_NUM_INTRAOP_THREADS"], m["OMP_STACKSIZE"], m["HSA_OVERRIDE_GFX_VERSION"],
                m["PYTORCH_HIP_ALLOC_CONF"]) == ("1", "1", "1", "1", "512k", "10.3.0",
                                                 "max_split_size_mb:64")
        assert m["ROCR_VISIBLE_DEVICES"].isdigit()  # the one GPU Ray gave the task
        assert m["HIP_VISIBLE_DEVICES"] == "0"
        start, end = int(m["LAUNCHER_CHUNK_START"]), int(m["LAUNCHER_CHUNK_END"])
        assert (m["first"], m["last"], m["n"]) == (f"item-{start}", f"item-{end - 1}",
                                                   end - start)  # its own items, in order


def test_kill_9_of_the_ray_driver_then_a_rerun_resumes(cluster, tmp_path):
    address, _ = cluster
    spec, prof = _job(tmp_path, "0.5")
    argv = [sys.executable, "-m", "launcher", "jobs", "run", str(spec), "-p", str(prof),
            "--backend", "ray", "--address", address, "--host-root", str(HOSTS / "rig-6600")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "marks/finished.log"
    kill_9_after(argv, log, 20, within=300)
    before = {r["id"]: r for r in ledger_rows(tmp_path / "out")}
    done_before = {i for i, r in before.items() if r["state"] == "done"}
    assert 0 < len(done_before) < 99
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    rows = ledger_rows(tmp_path / "out")
    assert len(rows) == 99 and {r["state"] for r in rows} == {"done"}
    assert all(rows[i]["started"] == before[i]["started"] for i in done_before)
    finished = log.read_text().split()
    for i in done_before:
        assert finished.count(f"{before[i]['start_item']}-{before[i]['end_item']}") == 1


def test_ray_node_command_declares_the_profile():
    proc = launcher("jobs", "ray-node", "-p", "rig-6600", "--address", "10.0.0.1:6379",
                    "--host-root", str(HOSTS / "rig-6600"), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["command"][:3] == ["ray", "start", "--address=10.0.0.1:6379"]
    assert "--num-gpus=12" in data["command"]
    assert '--resources={"launcher_slot":9}' in data["command"]  # 400MiB workers: 9 fit
    assert data["binding"].startswith("memory")


IMAGE = "registry.example.com/me/score:1"
# upstream supports the newest three; managed clusters still run the older ones (README: 1.29+)
K8S_VERSIONS = [f"1.{minor}" for minor in range(28, 38)]


def _render(out: Path, *extra: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return in_process("jobs", "render", str(ROOT / "examples/score-survivors/job.yaml"),
                    "--target", "k8s", "--out", str(out), "--host-root",
                    str(HOSTS / "rig-6600"), *extra)


@pytest.fixture(scope="module")
def k8s_manifest(tmp_path_factory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("k8s")
    proc = _render(out, "--image", IMAGE)
    assert proc.returncode == 0, proc.stderr
    return out / "launcher-score-survivors.yaml"


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_kubernetes_manifest_validates_for_each_version(k8s_manifest, version):
    """Every Kubernetes version still supported upstream, and the older ones managed
    clusters still run (1.28-1.34 require a podFailurePolicy rule's onPodConditions and
    their status)."""
    check = subprocess.run([str(Path(sys.executable).parent / "kubernetes-validate"),
                            "--strict", "-k", f"{version}.0", str(k8s_manifest)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(" passed for resource ") == 2  # the claim and the Job


def test_kubernetes_indexed_job_runs_as_rendered(k8s_manifest):
    import yaml

    claim, job = yaml.safe_load_all(k8s_manifest.read_text())
    assert (claim["kind"], claim["metadata"]["name"]) == ("PersistentVolumeClaim",
                                                          "launcher-score-survivors-results")
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"],
                             "resources": {"requests": {"storage": "10Gi"}}}
    s = job["spec"]
    assert (s["completionMode"], s["completions"], s["parallelism"]) == ("Indexed", 99, 9)
    assert s["backoffLimitPerIndex"] == 1 and s["template"]["spec"]["restartPolicy"] == "Never"
    c = s["template"]["spec"]["containers"][0]
    assert c["image"] == IMAGE and c["workingDir"] == "/workspace"
    assert c["resources"]["limits"]["amd.com/gpu"] == 1
    assert c["resources"]["limits"]["memory"] == str(400 << 20)
    volumes = {v["name"]: v for v in s["template"]["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": str(1 << 30)}
    assert volumes["results"]["persistentVolumeClaim"] == {
        "claimName": "launcher-score-survivors-results"}  # not an emptyDir, gone with the pod
    env = {e["name"]: e["value"] for e in c["env"]}
    assert (env["LAUNCHER_ITEMS"], env["LAUNCHER_CHUNK_SIZE"]) == ("98172", "1000")
    assert env["LAUNCHER_CHUNK_OUT_ROOT"] == "/results"
    assert "podPidsLimit" in job["metadata"]["annotations"]["launcher/pids"]
    # the job's own files in the image: launcher's image plus the job's folder in /workspace
    dockerfile = k8s_manifest.with_name("launcher-score-survivors.Dockerfile").read_text()
    assert dockerfile.splitlines()[-2:] == ["FROM launcher/rig-6600:torch",
                                            'COPY ["./", "/workspace/"]']
    assert f"-t {IMAGE} {ROOT / 'examples/score-survivors'} && docker push {IMAGE}" \
        in dockerfile
    lint = subprocess.run([str(Path(sys.executable).parent / "hadolint"), "--failure-threshold",
                           "error", str(k8s_manifest.with_name(
                               "launcher-score-survivors.Dockerfile"))],
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "runs/" in k8s_manifest.with_name(
        "launcher-score-survivors.Dockerfile.dockerignore").read_text().split()


POD_WORKER = """\
import os, sys
open(os.path.join(sys.argv[1], "part.txt"), "w").write(
    os.environ["LAUNCHER_CHUNK_START"] + "-" + os.environ["LAUNCHER_CHUNK_END"] + " " + os.getcwd())
"""


@pytest.mark.docker
def test_a_pod_of_the_rendered_job_runs_its_chunk_from_the_image(client, tmp_path):
    """The rendered Dockerfile puts the job's folder into launcher's image; a container run as
    the manifest's pod would be (its args, env, workingDir, an index, the claim at /results)
    runs the job's own worker and commits its chunk."""
    import yaml

    base = "launcher-test/jobs-pod:none"
    built = launcher("build", "-p", "rig-6600", "-f", "none", "--base-image", BASE, "--tag",
                     base)
    assert built.returncode == 0, built.stdout + built.stderr
    job = tmp_path / "job"
    job.mkdir()
    (job / "worker.py").write_text(POD_WORKER)
    (job / "job.yaml").write_text("name: podjob\ncommand: [python3, worker.py, '{out}']\n"
                                  "items: 10\nchunk_size: 4\nframework: none\n")
    image = f"registry.example.com/launcher-test/podjob:{os.getpid()}"
    proc = in_process("jobs", "render", str(job / "job.yaml"), "-p", "rig-6600", "--out",
                    str(tmp_path / "k8s"), "--image", image, "--base-image", base,
                    "--host-root", str(HOSTS / "rig-6600"))
    assert proc.returncode == 0, proc.stderr
    dockerfile = tmp_path / "k8s/launcher-podjob.Dockerfile"
    client.images.build(path=str(job), dockerfile=str(dockerfile), tag=image, rm=True)
    try:
        pod = list(yaml.safe_load_all((tmp_path / "k8s/launcher-podjob.yaml").read_text()))[-1]
        c = pod["spec"]["template"]["spec"]["containers"][0]
        results = tmp_path / "results"  # the claim
        results.mkdir()
        env = {e["name"]: e["value"] for e in c["env"]}
        for _ in range(2):  # a second pod of the same index finds it committed
            client.containers.run(
                c["image"], c["args"], working_dir=c["workingDir"], remove=True,
                environment={**env, "JOB_COMPLETION_INDEX": "1", "HOSTNAME": "podjob-1-x"},
                user=f"{os.getuid()}:{os.getgid()}",
                volumes={str(results): {"bind": "/results", "mode": "rw"}})
        assert (results / "00001/out/part.txt").read_text() == "4-8 /workspace"
        assert json.loads((results / "00001/out/_SUCCESS").read_text())["items"] == [4, 8]
        # its output, and the pod's run record beside it (the supervisor's watch)
        assert sorted(p.name for p in (results / "00001").iterdir()) == ["out",
                                                                         "record-podjob-1-x"]
        summary = json.loads((results / "00001/record-podjob-1-x/summary.json").read_text())
        assert summary["exit_status"] == 0 and summary["recorded_by"] == "supervisor"
    finally:
        client.images.remove(image, force=True)


def test_kubernetes_render_mistakes_are_one_line(tmp_path):
    local = _render(tmp_path, "--image", "launcher/rig-6600:torch")
    assert local.returncode == 1 and local.stderr.count("\n") == 1
    assert local.stderr.startswith("error: --image: 'launcher/rig-6600:torch' is not a pushed "
                                   "reference") and "launcher build --push" in local.stderr
    none = _render(tmp_path)
    assert none.returncode == 1 and "launcher build --push" in none.stderr
    bad = _render(tmp_path, "--image", IMAGE, "--claim", "Results; rm -rf /")
    assert bad.returncode == 1 and bad.stderr.startswith("error: --claim: ")
    base = _render(tmp_path, "--image", IMAGE, "--base-image", "x\nRUN curl evil")
    assert base.returncode == 1 and base.stderr.startswith("error: --base-image: ")
    assert not list(tmp_path.iterdir())  # nothing written
    named = _render(tmp_path, "--image", IMAGE, "--claim", "shared-results")
    assert named.returncode == 0, named.stderr
    import yaml

    [job] = yaml.safe_load_all((tmp_path / "launcher-score-survivors.yaml").read_text())
    assert job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "shared-results"}  # an existing claim: named, not written


def test_the_supervisor_derives_a_chunk_from_its_index_and_commits_it(tmp_path):
    """What a pod of the Indexed Job does: JOB_COMPLETION_INDEX -> the chunk's range, the
    workload's output written into an attempt folder and committed as INDEX/out by the pod."""
    (tmp_path / "items").write_text("".join(f"s{i}\n" for i in range(10)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JOB_COMPLETION_INDEX": "2",
           "LAUNCHER_CHUNK_SIZE": "4", "LAUNCHER_ITEMS": "10", "LAUNCHER_QUIET": "1",
           "LAUNCHER_CHUNK_OUT_ROOT": str(tmp_path / "results"), "LAUNCHER_RESOLVED": "1",
           "LAUNCHER_ITEMS_FILE": str(tmp_path / "items"), "HOSTNAME": "job-2-abcde"}
    code = ("import os, sys; print(sys.argv[1:], os.environ['LAUNCHER_CHUNK_START'], "
            "os.environ['LAUNCHER_CHUNK_END'], open(os.environ['LAUNCHER_CHUNK_FILE']).read()"
            ".split()); open(os.path.join(sys.argv[3], 'r.txt'), 'w').write('ok');"
            "sys.exit(int(os.environ.get('FAIL', '0')))")
    argv = [sys.executable, str(ROOT / "launcher/supervise/entrypoint.py"), sys.executable,
            "-c", code, "{start}", "{end}", "{out}", "x{index}"]
    chunk = tmp_path / "results/00002"
    failed = subprocess.run(argv, env={**env, "FAIL": "3"}, capture_output=True, text=True)
    assert failed.returncode == 3 and not (chunk / "out").exists()  # nothing committed
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    attempt = str(chunk / "attempt-job-2-abcde")
    assert proc.stdout.strip() == f"['8', '10', '{attempt}', 'x{{index}}'] 8 10 ['s8', 's9']"
    assert (chunk / "out/r.txt").read_text() == "ok"
    assert json.loads((chunk / "out/_SUCCESS").read_text())["items"] == [8, 10]
    assert not (chunk / "attempt-job-2-abcde").exists()
    again = subprocess.run(argv, env=env, capture_output=True, text=True)  # a later pod
    assert again.returncode == 0 and again.stdout == ""  # committed already: not run again
    assert "its output is committed already" in again.stderr


def test_a_ray_chunk_is_watched_and_stopped_by_its_supervisor(cluster, tmp_path):
    """The growth guard of a chunk is its supervisor's, on the node: the same leak as in
    tests/test_one_watcher.py, stopped with 75, its record in the chunk's folder."""
    address, _ = cluster
    spec, prof = leak_chunk_job(tmp_path)
    proc = launcher("jobs", "run", str(spec), "-p", str(prof), "--backend", "ray",
                    "--address", address, timeout=600, cwd=tmp_path)
    assert_chunk_watched(proc, tmp_path)
