#!/usr/bin/env bash
# Fetch, here (with network), what scripts/gpu-podman-checks.sh needs on a GPU host that has no
# network, no Docker and no registry: Debian bookworm's Podman 4.3 with crun, conmon, catatonit,
# the containers-common files and the shared libraries an Ubuntu 24.04 CUDA image may lack
# (.debs/, about 13 MB, unpacked there with `dpkg -x` into /tmp/podroot, never into /), and the
# wheels launcher needs there that the image lacks (.whl/: docker, click).
#
#   bash scripts/podman-bundle.sh          # in the repository root; both folders git-ignored
#
# Where this machine's apt sources are not bookworm, a separate apt state with a bookworm
# sources list is used (nothing of this machine's apt changes).
set -eu
cd "$(git rev-parse --show-toplevel)"
mkdir -p .git/info .debs .whl
for d in /.debs/ /.whl/; do grep -qxF "$d" .git/info/exclude 2>/dev/null || echo "$d" >>.git/info/exclude; done

# podman: libsubid4 libgpgme11 (libassuan0) libseccomp2 libdevmapper1.02.1; crun: libyajl2
# libseccomp2; conmon: libglib2.0-0 (not in Ubuntu's base image); checked with `ldd` on the
# unpacked binaries (the rest, libselinux1, libsystemd0, libcap2, libgpg-error0 ..., are in any
# Ubuntu 24.04 image)
PKGS="podman crun conmon catatonit golang-github-containers-common libgpgme11 libassuan0
      libyajl2 libseccomp2 libsubid4 libdevmapper1.02.1 libprotobuf-c1 libglib2.0-0"
apt_opts=()
if ! grep -rqs bookworm /etc/apt/sources.list /etc/apt/sources.list.d/; then
  st=/tmp/apt-bookworm; mkdir -p $st/lists/partial $st/cache/archives/partial
  echo "deb [trusted=yes] http://deb.debian.org/debian bookworm main" >$st/sources.list
  echo "deb [trusted=yes] http://deb.debian.org/debian-security bookworm-security main" >>$st/sources.list
  apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$st/lists
            -oDir::Etc::SourceList=$st/sources.list -oDir::Etc::SourceParts=/dev/null
            -oDir::Cache=$st/cache)
  apt-get "${apt_opts[@]}" update
fi
rm -f .debs/*.deb
# shellcheck disable=SC2086
(cd .debs && apt-get "${apt_opts[@]}" download $PKGS)

rm -f .whl/docker-*.whl .whl/click-*.whl .whl/typer-*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl docker==7.1.0 click==8.5.1

# what the binaries need that is neither carried nor on this machine
root=$(mktemp -d)
for f in .debs/*.deb; do dpkg -x "$f" "$root"; done
LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu \
  ldd "$root"/usr/bin/{podman,crun,conmon} | grep "not found" || echo "ldd: every library found"
rm -rf "$root"
du -sh .debs .whl
