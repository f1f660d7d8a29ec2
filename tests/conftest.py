from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.variables import managed

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
HOSTS = FIXTURES / "hosts"
GOLDEN = ROOT / "tests" / "golden"


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


def docker_client():  # type: ignore[no-untyped-def]
    """A live docker client, or skip (fail in CI, where the daemon must be there)."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("CI"):
            pytest.fail(f"CI needs a Docker daemon: {exc}")
        pytest.skip(f"no Docker daemon: {exc}")
