"""Figures as a person reads them (issue 15's small items): a negative slope with its sign in
front, singular units, no `0 items/s`, one rounding of a size printed and written."""

from __future__ import annotations

from click.testing import CliRunner

from launcher.cli.jobs_progress import rate_text
from launcher.cli.main import app
from launcher.units import mib_up, term


def test_a_negative_slope_has_its_sign_in_front():
    assert term(-1346.2, "bytes") == "- 1,346 bytes"
    assert term(51200, "bytes") == "+ 51,200 bytes"


def test_rates_below_one_item_a_second_are_not_zero():
    assert rate_text(0.0) == "<1 item/s"
    assert rate_text(0.3) == "<1 item/s"
    assert rate_text(1.2) == "1 item/s"
    assert rate_text(12.4) == "12 items/s"


def test_a_size_printed_and_written_is_rounded_once():
    assert mib_up(316 * 2**20 + 1) == "317MiB"  # not 316MiB printed and 317MiB written
    assert mib_up(317 * 2**20) == "317MiB"


def test_one_thread_is_singular(fake_engine, tmp_path):
    prof = tmp_path / "one.yaml"
    prof.write_text("extends: base\nframework: none\nthreads: {intra_op: 1}\n")
    result = CliRunner().invoke(app, ["run", "-p", str(prof), "--runtime", "fake", "--image",
                                      "img", "--", "true"])
    assert "~2 threads (~1 per process + 1 supervisor);" in result.stderr, result.stderr
