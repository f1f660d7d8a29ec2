#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run them: a Docker daemon, a local
# base image, a local registry, Podman, a venv with launcher, its dev tools and the frameworks.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# What it starts it stops on exit (passed, failed or interrupted), and only that: the dockerd of
# scripts/docker-up.sh, the Slurm cluster of scripts/slurm-up.sh (its own, beside any other) and
# the pause process rootless Podman leaves (tests/rootless.py's user). A Docker daemon that
# answered before, a cluster of slurm-up.sh's already up, or that user's processes, stay.
rootless=launcher-rootless
docker info >/dev/null 2>&1 && docker_was_up=1 || docker_was_up=
bash scripts/slurm-up.sh --status && slurm_was_up=1 || slurm_was_up=
pgrep -u "$rootless" >/dev/null 2>&1 && rootless_was_up=1 || rootless_was_up=
venv=
cleanup() {
  local rc=$?
  [ -n "$venv" ] && { wait "$venv" 2>/dev/null || true; }  # a pip install is not cut short
  [ -n "$slurm_was_up" ] || bash scripts/slurm-up.sh --down || rc=1
  [ -n "$docker_was_up" ] || bash scripts/docker-up.sh --down || rc=1
  if [ -z "$rootless_was_up" ] && pgrep -u "$rootless" >/dev/null 2>&1; then
    # `podman system migrate` stops the user's pause process (with the environment the tests gave)
    (cd / && runuser -u "$rootless" -- env -i PATH="$PATH" USER="$rootless" \
      HOME="$(getent passwd "$rootless" | cut -d: -f6)" podman system migrate) || rc=1
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# the venv installs (about a minute on a fresh machine) while the engines and images are set up
( python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev,frameworks,ray]' --config-settings editable_mode=compat ) &
venv=$!
bash scripts/docker-up.sh
bash scripts/base-image.sh launcher-base:bookworm
# a local registry for the push test (Debian's docker-registry; no registry is reachable here)
command -v docker-registry >/dev/null || { apt-get update -q && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-registry; }
# Podman, a second engine (tests/test_podman.py); its image store gets the base image from Docker's
# and rootless (tests/rootless.py: a user with subordinate IDs, newuidmap from uidmap)
{ command -v podman && command -v newuidmap; } >/dev/null || { apt-get update -q && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman uidmap; }
base_id=$(docker image inspect -f '{{.Id}}' launcher-base:bookworm)
[ "sha256:$(podman image inspect -f '{{.Id}}' launcher-base:bookworm 2>/dev/null)" = "$base_id" ] \
  || podman pull -q docker-daemon:launcher-base:bookworm >/dev/null
# lsof: examples/growth/corpus/torch_gloo_new_group.py (pytorch#129868) counts its descriptors so
command -v lsof >/dev/null || { apt-get update -q && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q lsof; }
# a pure cgroup v2 kernel for the lab (tests/test_cgroup2_lab.py): user-mode Linux, and where the
# host refuses it (FIELD.md 47-48) Debian's kernel under QEMU, with an initramfs the lab builds in
# a temp folder (busybox-static, cpio). No recommends: no firmware, no bootloader. The kernel
# package needs an initramfs tool: the one installed, else tiny-initramfs (initramfs-tools would
# pull udev and a systemd upgrade); nothing changes how this machine boots
command -v linux >/dev/null || { apt-get update -q && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q user-mode-linux; }
lab_qemu="qemu-system-x86 linux-image-amd64 busybox-static cpio"
[ "$(dpkg-query -W -f '${db:Status-Status}\n' $lab_qemu 2>/dev/null | grep -c '^installed$')" \
  = 4 ] || { dpkg-query -W -f '${db:Status-Status}\n' initramfs-tools dracut 2>/dev/null | \
  grep -q '^installed$' || lab_qemu="$lab_qemu tiny-initramfs"; apt-get update -q && \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $lab_qemu; }
# a one-node Slurm cluster for the Slurm backend (tests/test_slurm.py; about 10 s on a fresh
# machine): its config in a folder of its own, which the tests reach through SLURM_CONF
bash scripts/slurm-up.sh
SLURM_CONF=$(bash scripts/slurm-up.sh --conf)
export SLURM_CONF
wait "$venv" || { venv=; echo "installing the venv failed" >&2; exit 1; }
venv=
.venv/bin/ruff check .
.venv/bin/mkdocs build --strict --site-dir "${TMPDIR:-/tmp}/launcher-site"
# with arguments, pytest as given (e.g. one file: scripts/test.sh tests/test_jobs.py -x)
if [ $# -gt 0 ]; then .venv/bin/python -m pytest -q "$@"; exit; fi
# the suite with each test file on one of two workers (about 40% of one worker's time is spent
# waiting on containers, Ray and child processes), then the cgroup v2 lab alone: it pins a
# user-mode Linux kernel to each CPU and would only slow the rest
t0=$(date +%s)
rc=0
.venv/bin/python -m pytest -q -rs -n "${LAUNCHER_TEST_WORKERS:-2}" --dist loadfile \
  --ignore tests/test_cgroup2_lab.py || rc=$?
t1=$(date +%s)
.venv/bin/python -m pytest -q -rs tests/test_cgroup2_lab.py || rc=$?
echo "scripts/test.sh: setup $(( t0 - start )) s, tests $(( t1 - t0 )) s," \
  "cgroup v2 lab $(( $(date +%s) - t1 )) s"
[ -n "${LAUNCHER_LAB_PHASE_FILE:-}" ] && echo $(( $(date +%s) - t1 )) > "$LAUNCHER_LAB_PHASE_FILE"
exit $rc
