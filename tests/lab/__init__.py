"""A cgroup v2 lab for `launcher run --runtime native`: one user-mode Linux boot (a real, pure
cgroup v2 kernel, FIELD.md 35) runs every caller layout x limit x --require-limits scenario and
judges each from the kernel's counters (verdict.py). Entry points: `scripts/cgroup2-lab.py` and
tests/test_cgroup2_lab.py; `host.run_lab` boots it, `guest` runs inside it."""
