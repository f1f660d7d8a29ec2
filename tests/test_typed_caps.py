"""What the caps decide on is data beside the words: a reason's kind, a value's origin, a
limit lowered, the limit the budget comes from. Each check here breaks where code goes back
to reading the words (or the data goes missing)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from launcher.caps.model import Bound, Origin, Why
from launcher.caps.resolve import resolve
from launcher.errors import Refused
from launcher.probe import probe_host
from launcher.profiles import load_profile
from tests.conftest import HOSTS, ROOT
from tests.docker_helpers import profile


@pytest.fixture
def limited():  # pids.max 77, 300 MiB of memory, nofile hard 524288, no GPU
    return probe_host(HOSTS / "v2-limited", environ={})


def _profile(tmp_path, text):  # type: ignore[no-untyped-def]
    return load_profile(Path(profile(tmp_path, "p", "extends: base\n" + text)))


def test_the_budget_says_which_limit_gives_it(tmp_path, limited):
    from launcher.supervise.enforce import Entry

    own = resolve(_profile(tmp_path, "limits: {pids: 40}\n"), limited).caps
    assert own.budget.bound_by is Bound.PIDS_LIMIT
    marked = Entry(advisory={"pids": "no cgroup here"}).mark_budget(own)
    assert marked.budget.binding == "pids limit 40, advisory: not enforced here"
    assert own.budget.binding == "pids limit 40"  # a new value, the old one as it was
    host = resolve(_profile(tmp_path, ""), limited).caps  # the cgroup's pids.max binds
    assert host.budget.bound_by is Bound.PIDS_MAX
    assert Entry(advisory={"pids": "no cgroup here"}).mark_budget(host) is host
    assert Entry().mark_budget(own) is own  # enforced: nothing to say


def test_the_parts_are_values_not_changed_after_they_are_made(limited):
    caps = resolve(load_profile("base"), limited).caps
    for part, name in ((caps.budget, "available"), (caps.estimate, "total"),
                       (caps.gpu, "count"), (caps.verdict, "level")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(part, name, 1)


def test_a_limit_lowered_to_this_host_is_marked_so(tmp_path, limited):
    big = resolve(_profile(tmp_path, "limits: {memory: 1GiB, nofile: 1048576}\n"), limited,
                  clamp=True).caps
    assert big.limits["memory"].lowered and big.ulimits["nofile"].lowered
    assert big.limits["memory"].origin is Origin.PROFILE
    small = resolve(_profile(tmp_path, "limits: {memory: 100MiB, nofile: 4096}\n"), limited,
                    clamp=True).caps
    assert not small.limits["memory"].lowered and not small.ulimits["nofile"].lowered


def test_a_lowered_ulimit_is_a_warning_where_the_user_asked_for_it(tmp_path, limited,
                                                                     monkeypatch):
    from launcher.supervise import apply

    monkeypatch.setattr(apply.resource, "setrlimit", lambda *_: None)  # this process keeps its
    caps = resolve(_profile(tmp_path, "limits: {nofile: 1048576}\n"), limited, clamp=True).caps
    warnings, notes = apply.apply_rlimits(caps, lambda key: False)
    assert [w.split(":")[0] for w in warnings] == ["nofile"] and notes == []
    warnings, notes = apply.apply_rlimits(caps, lambda key: key == "limits.nofile")
    assert warnings == [] and [n.split(":")[0] for n in notes] == ["nofile"]


def test_a_source_is_shown_only_where_it_is_no_choice_of_the_profile(tmp_path, limited):
    from launcher.supervise.report import brief_threads

    prof = _profile(tmp_path, "env: {MKL_NUM_THREADS: '1'}\n")
    caps = resolve(prof, limited, overrides={"OMP_NUM_THREADS": "3"}).caps
    assert caps.env["MKL_NUM_THREADS"].origin is Origin.PROFILE
    assert caps.env["OMP_NUM_THREADS"].origin is Origin.OVERRIDE
    said = brief_threads(caps)
    assert "OMP 3 (--env (explicit override))" in said
    assert "(profile" not in said and "(auto" not in said


def test_a_limit_derived_is_never_one_asked_above_the_outer(tmp_path, limited):
    # hardware.reserved_memory derives a memory limit above the cgroup's 300 MiB: not asked
    caps = resolve(_profile(tmp_path, "hardware: {memory: 1GiB, reserved_memory: 100MiB}\n"),
                   limited).caps
    assert caps.limits["memory"].origin is Origin.AUTO
    assert not any(r.kind is Why.ABOVE_OUTER for r in caps.verdict.said)
    asked = resolve(_profile(tmp_path, "limits: {memory: 1GiB}\n"), limited).caps
    assert [r.kind for r in asked.verdict.said].count(Why.ABOVE_OUTER) == 1


def test_a_refusal_for_missing_gpus_says_them_once_in_the_selections_words(tmp_path, limited):
    from launcher.usecases.run_checks import check_verdict

    r = resolve(_profile(tmp_path, "limits: {pids: 1}\ngpu: {vendor: nvidia, count: 2}\n"),
                limited)
    kinds = [x.kind for x in r.caps.verdict.said]
    assert r.caps.verdict.level == "refuse" and Why.GPU_SHORT in kinds and Why.PIDS in kinds
    with pytest.raises(Refused) as refused:
        check_verdict(r, lambda: "launcher plan", None)
    gpu_reason = next(x.text for x in r.caps.verdict.said if x.kind is Why.GPU_SHORT)
    assert gpu_reason not in str(refused.value)
    assert r.selection.shortfall and r.selection.shortfall[1:] in str(refused.value)


def test_nothing_fits_names_what_asked_for_the_fit(tmp_path, limited):
    from launcher.caps.fit import why_nothing_fits

    wide = probe_host(HOSTS / "v2-unlimited", environ={})  # 8 CPUs: pools that could shrink
    for text, facts in (("limits: {pids: 1}\n", limited),
                        ("framework: torch\nlimits: {pids: 3}\n", wide)):
        r = resolve(_profile(tmp_path, text), facts)
        assert why_nothing_fits(r).startswith("--fit: nothing")
        assert why_nothing_fits(r, by="limits.fit").startswith("limits.fit: nothing")


def test_jobs_plan_lists_the_reasons_less_the_gpus_it_says_at_the_top():
    from launcher.usecases.jobs_plan import JobsPlanRequest, plan

    spec = ROOT / "examples" / "score-survivors" / "job.yaml"  # 12 AMD GPUs; this host: none
    got = plan(JobsPlanRequest(spec=spec, host_root=HOSTS / "v2-unlimited"))
    said = got.prepared.resolved.caps.verdict.said
    assert got.shortfall and any(x.kind is Why.GPU_SHORT for x in said)
    assert list(got.reasons) == [x.text for x in said if x.kind is not Why.GPU_SHORT]
    cpu = plan(JobsPlanRequest(spec=spec, host_root=HOSTS / "v2-unlimited", gpus="none"))
    assert cpu.shortfall is None and list(cpu.reasons) == cpu.prepared.resolved.caps.verdict.reasons
