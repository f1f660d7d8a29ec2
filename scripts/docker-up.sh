#!/usr/bin/env bash
# Make sure a Docker daemon answers: install docker.io and start dockerd when none does.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if ! command -v dockerd >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
fi
echo "starting dockerd..."
nohup dockerd > /tmp/dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && { echo "dockerd is up"; exit 0; }
  sleep 1
done
echo "dockerd did not start; see /tmp/dockerd.log" >&2
tail -20 /tmp/dockerd.log >&2
exit 1
