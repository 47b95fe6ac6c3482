#!/usr/bin/env bash
# Build the systemd base images the Molecule scenarios run on. No registry is
# reachable, so images come from debootstrap + `docker import`, and are reused
# while their recipe (this file's content + release + package list) is unchanged.
#   base-images.sh [debian12] [debian13]     (default: both)
set -euo pipefail

MIRROR=${GPUFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What a minimal managed server has, plus python3-apt so Ansible's apt modules
# need not install it into every test container.
PACKAGES="systemd,systemd-sysv,dbus,python3,python3-apt,sudo,ca-certificates,iproute2,procps,kmod,gpgv"
# The build tools Debian's dkms depends on (bookworm: gcc, dpkg-dev, make,
# patch; trixie's dkms only recommends gcc, which its kernel headers pull).
# Every scenario's driver converge installs dkms: with these in the image it
# unpacks one package instead of about 40 (gcc, binutils, perl, ...), once per
# image build instead of once per container, which is most of what a driver
# converge spent in apt. The role still installs dkms itself, from Debian's
# archive, with apt resolving its dependencies; these are Debian's packages
# at the archive's current versions, as on a server with a compiler.
BUILD_TOOLS="gcc dpkg-dev make patch"

declare -A SUITE=([debian12]=bookworm [debian13]=trixie)
here=$(cd "$(dirname "$0")" && pwd)
recipe_hash() {
  { cat "$0"; echo "$1 $MIRROR $PACKAGES $BUILD_TOOLS"; } | sha256sum | cut -c1-12
}

retry() {
  local n=0
  until "$@"; do
    n=$((n + 1))
    if [ "$n" -ge 3 ]; then echo "failed after $n attempts: $*" >&2; return 1; fi
    sleep $((n * 10))
  done
}

build() {
  local name=$1 suite=${SUITE[$1]} tag
  tag="gpufleet/${name}-systemd:$(recipe_hash "$name")"
  if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag: cached"
  else
    command -v debootstrap >/dev/null || {
      export DEBIAN_FRONTEND=noninteractive
      retry apt-get update -qq && retry apt-get install -y -qq debootstrap >/dev/null
    }
    local root
    root=$(mktemp -d /var/tmp/gpufleet-rootfs.XXXXXX)
    trap 'rm -rf "$root"' RETURN
    echo "base image $tag: debootstrap $suite (a few minutes)"
    retry debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$root" "$MIRROR" \
      >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; return 1; }
    rm -f "$root.log"
    # A server's usual sources: the release, its updates and security.
    cat >"$root/etc/apt/sources.list" <<SOURCES
deb $MIRROR $suite main
deb $MIRROR $suite-updates main
deb ${MIRROR%/debian}/debian-security $suite-security main
SOURCES
    # apt's download user cannot write the chroot's lists as built by
    # debootstrap; the chroot is ours and thrown away after the import.
    retry chroot "$root" apt-get -qq -o APT::Sandbox::User=root update >/dev/null
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive retry chroot "$root" apt-get install -y -qq -o APT::Sandbox::User=root --no-install-recommends \
      $BUILD_TOOLS >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; return 1; }
    rm -f "$root.log"
    # Trim what a container never uses and make systemd container-friendly.
    chroot "$root" apt-get clean
    rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
    # The package lists are emptied above: date them far in the past so that
    # apt's cache_valid_time refreshes them on first use instead of trusting them.
    touch -d '2000-01-01' "$root/var/lib/apt/lists"
    for unit in systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
                getty.target console-getty.service systemd-remount-fs.service; do
      ln -sf /dev/null "$root/etc/systemd/system/$unit"
    done
    printf '%s\n' "$name" >"$root/etc/hostname"
    : >"$root/etc/machine-id"
    tar -C "$root" -c . | docker import \
      --change 'CMD ["/lib/systemd/systemd"]' \
      --change 'ENV container=docker' \
      - "$tag" >/dev/null
    echo "base image $tag: built"
  fi
  # A stable name for scenarios; the hash tag keeps the cache honest.
  docker tag "$tag" "gpufleet/${name}-systemd:latest"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(debian12 debian13)
for t in "${targets[@]}"; do
  [ -n "${SUITE[$t]:-}" ] || { echo "unknown image $t (known: ${!SUITE[*]})" >&2; exit 2; }
  build "$t"
done
