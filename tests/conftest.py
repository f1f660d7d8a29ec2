from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.variables import managed

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
HOSTS = FIXTURES / "hosts"
GOLDEN = ROOT / "tests" / "golden"

# the shared helpers' asserts say what they compared, as a test file's do
pytest.register_assert_rewrite("tests.docker_helpers", "tests.polling")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests see no managed variable from the developer's shell; runs go to a temp folder."""
    for name in managed():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LAUNCHER_RUNS_DIR", str(tmp_path_factory.mktemp("runs")))
    monkeypatch.delenv("LAUNCHER_CGROUP_ROOT", raising=False)
    monkeypatch.setenv("LAUNCHER_PROFILE_PATH", "")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(FIXTURES / "no-user-config"))


def check_golden(path: Path, text: str, update: bool) -> None:
    """`text` equals the golden file; `pytest --update-golden` (re)writes it. A missing golden
    fails: it is written only when asked, never to make a test pass."""
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run pytest --update-golden to write it")
    assert text == path.read_text(), f"{path} differs; run pytest --update-golden to accept"


def need(thing: str, why: str | None) -> None:
    """The one rule for what a test needs and this machine may lack (a Docker daemon, Podman,
    Ray, Slurm, a framework, root): `why` says why `thing` is missing here, or None where it is
    not. Outside CI that skips, with why; under CI (the `CI` variable set) it fails, since CI
    provides every such thing (scripts/test.sh installs and starts them, docs/testing.md), so
    no claim passes there by being skipped. Only what is a fact of the host and no install
    can give (the CPUs, the kernel's features, a GPU) skips with a plain pytest.skip."""
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI needs {thing}: {why}", pytrace=False)
    pytest.skip(f"needs {thing}: {why}")


def docker_client():  # type: ignore[no-untyped-def]
    """A live docker client, or need() says what is missing."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001
        need("a Docker daemon", f"none answers: {exc}")


@pytest.fixture(scope="session")
def client():  # type: ignore[no-untyped-def]
    """The live docker client of docker_client(), one for the session."""
    return docker_client()


@pytest.fixture
def root() -> None:
    """The test runs as root (setpriv, namespaces, another user's processes, cgroups)."""
    need("root", None if os.geteuid() == 0 else f"this process runs as uid {os.geteuid()}")


@pytest.fixture(scope="session")
def fakes_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/plugins/launcher-fakes installed as its own distribution (pip install --target):
    a third party's engine, backend, render target, vendor, framework and workload."""
    import shutil
    import subprocess
    import sys

    src = tmp_path_factory.mktemp("fakes-src") / "launcher-fakes"  # pip builds in place
    shutil.copytree(ROOT / "tests/plugins/launcher-fakes", src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path_factory.mktemp("fakes-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(src)], check=True)
    return site


@pytest.fixture
def fakes(fakes_site: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The fakes installed where Python finds distributions: on sys.path, as site puts a
    site-packages folder, and on PYTHONPATH for the launcher processes a test starts. launcher
    finds them only through their entry points."""
    import sys

    from launcher import dists
    from launcher.profiles import schema

    def forget() -> None:  # what launcher found installed, and the schema composed from it
        dists.installed.cache_clear()
        dists.entry_points.cache_clear()
        dists._declarations.cache_clear()
        schema.composed.cache_clear()

    sys.path.insert(0, str(fakes_site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(fakes_site), os.environ.get("PYTHONPATH")])))
    forget()
    yield fakes_site
    sys.path.remove(str(fakes_site))
    forget()


@pytest.fixture
def fake_engine(fakes: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The fake engine's class (it records its calls), its record emptied."""
    from launcher_fakes.engine import FakeEngine

    FakeEngine.calls.clear()
    monkeypatch.setattr(FakeEngine, "status", 0)
    return FakeEngine
