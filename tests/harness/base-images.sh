#!/usr/bin/env bash
# Build the systemd base images the Molecule scenarios run on. No registry is
# reachable, so images come from debootstrap + `docker import`, and are reused
# while their recipe (this file's content + release + package list) is unchanged.
#   base-images.sh [debian12] [debian13] [ubuntu2204] [ubuntu2404]   (default: all)
#
# The Ubuntu-shaped images are NOT Ubuntu: no Ubuntu archive is reachable from
# our machines. Each is a Debian image (ubuntu2204 from bookworm, ubuntu2404
# from trixie: the Debian release Ubuntu's own /etc/debian_version names, the
# one its toolchain and systemd were taken from) with Ubuntu's os-release,
# lsb-release, debian_version and apt source layout (22.04: one-line
# sources.list; 24.04: deb822 ubuntu.sources). The harness serves a simulated
# Canonical archive for those sources and points them at it in prepare
# (molecule/_shared/prepare.yml); Debian's archive stays configured, labelled,
# for the userland's own packages (dkms, gcc). docs/testing.md says what such
# a host can and cannot show.
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
# Shaped image -> the Debian image it is derived from.
declare -A SHAPED_FROM=([ubuntu2204]=debian12 [ubuntu2404]=debian13)
here=$(cd "$(dirname "$0")" && pwd)
# The Debian images' recipe is this file down to the shaped images' part, so
# that a change to the shaping rebuilds only the shaped images (seconds), not
# the Debian ones (minutes).
recipe_hash() {
  { sed '/^# === Shaped images/q' "$0"; echo "$1 $MIRROR $PACKAGES $BUILD_TOOLS"; } | sha256sum | cut -c1-12
}
shaped_hash() {
  { recipe_hash "${SHAPED_FROM[$1]}"; cat "$0"; echo "$1"; } | sha256sum | cut -c1-12
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

# === Shaped images (their recipe: the whole file; see recipe_hash)

# Ubuntu's files, as on a 22.04.5 / 24.04.2 server (sources and facts:
# docs/reference/platform-package-facts.md, sections 1.7 and 1.8). VARIANT
# says what the host is; it must not contain "Debian", which Ansible's
# os-release parser would take for the distribution.
ubuntu_files() {
  local version=$1 codename=$2 point=$3 name=$4 debian_suite=$5
  cat <<EOF
--- /usr/lib/os-release
PRETTY_NAME="Ubuntu $version.$point LTS"
NAME="Ubuntu"
VERSION_ID="$version"
VERSION="$version.$point LTS ($name)"
VERSION_CODENAME=$codename
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=$codename
EOF
  [ "$version" = 24.04 ] && echo "LOGO=ubuntu-logo"
  cat <<EOF
VARIANT="gpufleet.nvidia shaped test host, not Ubuntu: see /etc/gpufleet-shaped-host"
VARIANT_ID=gpufleet-shaped
--- /etc/lsb-release
DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=$version
DISTRIB_CODENAME=$codename
DISTRIB_DESCRIPTION="Ubuntu $version.$point LTS"
--- /etc/debian_version
$debian_suite/sid
--- /etc/gpufleet-shaped-host
This test host is shaped like Ubuntu $version ($codename); it is not Ubuntu.
Userland: Debian $debian_suite (its packages, Python, apt and systemd versions).
Kernel: the machine's, shared by every container (uname -r).
Ubuntu's files: os-release, lsb-release, debian_version, the apt source layout.
Archive: a simulated Canonical archive served by the gpufleet.nvidia test
harness (tests/nvidia_sim/repo), for what the roles install from Ubuntu.
Debian's archive stays configured for the userland's own packages:
/etc/apt/sources.list.d/debian-userland.sources.
--- /etc/apt/sources.list.d/debian-userland.sources
# The shaped host's userland is Debian's: its own packages (dkms, gcc, python3)
# come from Debian's archive. What the roles install from Ubuntu comes from the
# simulated Canonical archive of the Ubuntu sources.
Types: deb
URIs: $MIRROR
Suites: $debian_suite $debian_suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

# Ubuntu's sources name archive.ubuntu.com until prepare points them at the
# simulated archive (its URL holds the build's content hash), as a site
# points them at its mirror.
ubuntu_sources() {
  local version=$1 codename=$2
  if [ "$version" = 22.04 ]; then
    cat <<EOF
--- /etc/apt/sources.list
deb http://archive.ubuntu.com/ubuntu/ $codename main restricted
deb http://archive.ubuntu.com/ubuntu/ $codename-updates main restricted
deb http://archive.ubuntu.com/ubuntu/ $codename universe
deb http://archive.ubuntu.com/ubuntu/ $codename-updates universe
deb http://archive.ubuntu.com/ubuntu/ $codename multiverse
deb http://archive.ubuntu.com/ubuntu/ $codename-updates multiverse
deb http://archive.ubuntu.com/ubuntu/ $codename-backports main restricted universe multiverse
deb http://security.ubuntu.com/ubuntu/ $codename-security main restricted
deb http://security.ubuntu.com/ubuntu/ $codename-security universe
deb http://security.ubuntu.com/ubuntu/ $codename-security multiverse
EOF
  else
    cat <<EOF
--- /etc/apt/sources.list.d/ubuntu.sources
Types: deb
URIs: http://archive.ubuntu.com/ubuntu/
Suites: $codename $codename-updates $codename-backports
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

Types: deb
URIs: http://security.ubuntu.com/ubuntu/
Suites: $codename-security
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
EOF
  fi
}

# A container of the Debian image, changed by a script and committed: seconds,
# where a debootstrap of its own would take minutes.
shape() {
  local name=$1 from=${SHAPED_FROM[$1]} base tag container
  base="gpufleet/${from}-systemd:$(recipe_hash "$from")"
  tag="gpufleet/${name}-systemd:$(shaped_hash "$name")"
  if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "shaped image $tag: cached"
  else
    case $name in
      ubuntu2204) set -- 22.04 jammy 5 "Jammy Jellyfish" "${SUITE[$from]}" ;;
      ubuntu2404) set -- 24.04 noble 2 "Noble Numbat" "${SUITE[$from]}" ;;
    esac
    container="gpufleet-shape-$name-$$"
    # Files are streamed as "--- <path>" headers followed by their lines.
    { ubuntu_files "$@"; ubuntu_sources "$1" "$2"; } |
      docker run -i --name "$container" --network none "$base" /bin/sh -c '
        set -eu
        rm -f /etc/apt/sources.list /etc/os-release
        path=""
        while IFS= read -r line; do
          case $line in
            "--- "*) path=${line#--- }; mkdir -p "$(dirname "$path")"; : >"$path" ;;
            *) printf "%s\n" "$line" >>"$path" ;;
          esac
        done
        ln -s ../usr/lib/os-release /etc/os-release
        echo "$0" >/etc/hostname
      ' "$name" || { docker rm -f "$container" >/dev/null 2>&1; return 1; }
    docker commit --change 'CMD ["/lib/systemd/systemd"]' "$container" "$tag" >/dev/null
    docker rm "$container" >/dev/null
    echo "shaped image $tag: built from $base"
  fi
  docker tag "$tag" "gpufleet/${name}-systemd:latest"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(debian12 debian13 ubuntu2204 ubuntu2404)
for t in "${targets[@]}"; do
  if [ -n "${SUITE[$t]:-}" ]; then
    build "$t"
  elif [ -n "${SHAPED_FROM[$t]:-}" ]; then
    build "${SHAPED_FROM[$t]}"
    shape "$t"
  else
    echo "unknown image $t (known: ${!SUITE[*]} ${!SHAPED_FROM[*]})" >&2
    exit 2
  fi
done
