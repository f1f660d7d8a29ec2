#!/usr/bin/env bash
# Make sure a Docker daemon answers. One that already does (the system's, DOCKER_HOST's) is used
# as it is and never stopped here; where none does, install docker.io if needed and start dockerd,
# its pid in $TMPDIR/launcher-dockerd.pid and its log beside it.
# `docker-up.sh --down` stops that dockerd (and so the containers it still runs) and nothing else:
# scripts/test.sh calls it on exit when no daemon answered before it.
set -euo pipefail
pidfile=${TMPDIR:-/tmp}/launcher-dockerd.pid log=${TMPDIR:-/tmp}/launcher-dockerd.log

ours() {  # the pid of the dockerd this script started, if it still runs
  local pid
  pid=$(cat "$pidfile" 2>/dev/null) && [ -n "$pid" ] \
    && [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = dockerd ] && echo "$pid"
}
down() {
  local pid
  if pid=$(ours); then
    kill "$pid"
    # dockerd stops its containers (10 s each at most) and its containerd before it exits
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "dockerd ($pid) is down"
  fi
  rm -f "$pidfile"
}
if [ "${1:-}" = --down ]; then down; exit 0; fi

if docker info >/dev/null 2>&1; then exit 0; fi
if ! command -v dockerd >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
fi
rm -f "$pidfile"  # no daemon answers: a pid left there is stale
echo "starting dockerd..."
nohup dockerd > "$log" 2>&1 &
echo $! > "$pidfile"
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && { echo "dockerd is up"; exit 0; }
  sleep 1
done
echo "dockerd did not start; see $log" >&2
tail -20 "$log" >&2
down
exit 1
