#!/usr/bin/env bash
# Build a local Debian base image without any registry: debootstrap + docker import.
# Usage: scripts/base-image.sh [NAME]   (default launcher-base:bookworm)
set -euo pipefail
name=${1:-launcher-base:bookworm}
if docker image inspect "$name" >/dev/null 2>&1; then
  echo "base image $name exists"; exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
rootfs=$(mktemp -d /tmp/launcher-rootfs.XXXXXX)
chmod 755 "$rootfs"  # the image's /: mktemp's 0700 bars any non-root user (rootless vfs)
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm from $mirror (about a minute)..."
debootstrap --variant=minbase --include=python3,python3-numpy,libopenblas0-pthread,ca-certificates \
  bookworm "$rootfs" "$mirror" > /tmp/launcher-debootstrap.log 2>&1 \
  || { tail -20 /tmp/launcher-debootstrap.log; exit 1; }
tar -C "$rootfs" -c . | docker import - "$name" >/dev/null
echo "built base image $name"
