"""`launcher plan --json` for every shipped profile against a fixed host, compared whole."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from launcher.cli.main import app
from launcher.profiles import available
from tests.conftest import GOLDEN, HOSTS, check_golden

runner = CliRunner()


@pytest.mark.parametrize("name", sorted(available()))
def test_plan_json_golden(name, update_golden):
    result = runner.invoke(app, ["plan", "--profile", name, "--json",
                                 "--host-root", str(HOSTS / "v2-limited")])
    assert result.exit_code == 0, result.output
    check_golden(GOLDEN / "plan" / f"{name}.json", result.stdout, update_golden)
