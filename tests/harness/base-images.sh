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

# Also base-images.sh rocky9. The Rocky-shaped image (from bookworm) is NOT
# Rocky Linux either: Debian's userland with Debian's real dnf 4.14 (the
# version Rocky 9 ships), rpm 4.18, dnf-plugins-core (versionlock), dracut and
# dkms, an empty RPM database at Rocky's path, and Rocky 9.5's os-release,
# release files and repository files. The harness serves simulated BaseOS,
# AppStream, EPEL and NVIDIA rhel9 repositories (rpmbuild, createrepo_c,
# modules.yaml) and prepare points the repository files at them.
SHAPED_FROM[rocky9]=debian12
# Debian's packages that make the Rocky-shaped userland: Debian's own dnf and
# rpm (their Python bindings for Ansible's dnf module), versionlock, dracut
# in place of initramfs-tools, gnupg for rpm_key, dkms for the driver.
EL_USERLAND="dnf python3-dnf dnf-plugins-core rpm dracut dracut-core gnupg dkms"

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

# Rocky Linux 9.5's files (docs/reference/platform-package-facts.md, 2.5).
# dnf finds $releasever in the RPM database (rocky-release provides it); the
# shaped host's database starts empty, so dnf's vars directory says it, as
# it may on any EL host.
rocky_files() {
  cat <<'EOF'
--- /usr/lib/os-release
NAME="Rocky Linux"
VERSION="9.5 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.5"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.5 (Blue Onyx)"
ANSI_COLOR="0;32"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
HOME_URL="https://rockylinux.org/"
VENDOR_NAME="RESF"
VENDOR_URL="https://resf.org/"
BUG_REPORT_URL="https://bugs.rockylinux.org/"
SUPPORT_END="2032-05-31"
ROCKY_SUPPORT_PRODUCT="Rocky-Linux-9"
ROCKY_SUPPORT_PRODUCT_VERSION="9.5"
REDHAT_SUPPORT_PRODUCT="Rocky Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.5"
VARIANT="gpufleet.nvidia shaped test host, not Rocky Linux: see /etc/gpufleet-shaped-host"
VARIANT_ID=gpufleet-shaped
--- /etc/rocky-release
Rocky Linux release 9.5 (Blue Onyx)
--- /etc/rocky-release-upstream
Derived from Red Hat Enterprise Linux 9.5
--- /etc/dnf/vars/releasever
9
--- /etc/dnf/vars/contentdir
pub/rocky
--- /etc/dnf/dnf.conf
[main]
gpgcheck=1
installonly_limit=3
clean_requirements_on_remove=True
best=True
skip_if_unavailable=False
--- /etc/dnf/plugins/local.conf
# Debian's dnf-plugins-core ships and enables the "local" plugin (a local
# repository of every installed package); Rocky ships it apart, not installed.
[main]
enabled = false
--- /usr/lib/dracut/dracut.conf.d/01-dist.conf
# As Rocky's dracut: host-only images (they carry /etc/modprobe.d; Debian's
# dracut defaults to generic ones).
hostonly="yes"
hostonly_cmdline="no"
--- /etc/rpm/macros.gpufleet-shaped-host
# Debian's rpm keeps its database in ~/.rpmdb; an EL host's is here.
%_dbpath /var/lib/rpm
--- /etc/yum.repos.d/rocky.repo
[baseos]
name=Rocky Linux $releasever - BaseOS
mirrorlist=https://mirrors.rockylinux.org/mirrorlist?arch=$basearch&repo=BaseOS-$releasever$rltype
#baseurl=http://dl.rockylinux.org/$contentdir/$releasever/BaseOS/$basearch/os/
gpgcheck=1
enabled=1
countme=1
metadata_expire=6h
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9

[appstream]
name=Rocky Linux $releasever - AppStream
mirrorlist=https://mirrors.rockylinux.org/mirrorlist?arch=$basearch&repo=AppStream-$releasever$rltype
#baseurl=http://dl.rockylinux.org/$contentdir/$releasever/AppStream/$basearch/os/
gpgcheck=1
enabled=1
countme=1
metadata_expire=6h
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9
--- /usr/sbin/alternatives
#!/bin/sh
# Shaped host: Debian's update-alternatives under the name and with the admin
# directory of Rocky's (chkconfig's) alternatives. Their --install, --set,
# --auto and --remove take the same arguments and write the same admin file
# (mode, link, slaves, then each member and its priority); --display and
# --list differ and are not offered here.
case "$1" in
  --display|--list) echo "alternatives $1: not offered by this shaped host (see /etc/gpufleet-shaped-host)" >&2; exit 2 ;;
esac
exec /usr/bin/update-alternatives --admindir /var/lib/alternatives "$@"
--- /etc/gpufleet-shaped-host
This test host is shaped like Rocky Linux 9.5; it is not Rocky Linux.
Userland: Debian bookworm (its packages, Python 3.11, systemd 252), with
Debian's real dnf 4.14, rpm 4.18, dnf-plugins-core (versionlock), dracut,
gnupg and dkms. The RPM database (/var/lib/rpm) holds only what dnf installs.
Kernel: the machine's, shared by every container (uname -r).
Rocky's files: os-release, rocky-release (redhat-release, system-release),
dnf.conf, yum.repos.d/rocky.repo, dnf vars. /usr/sbin/alternatives is
Debian's update-alternatives with Rocky's admin directory (/var/lib/alternatives).
Repositories: simulated BaseOS, AppStream, EPEL and NVIDIA rhel9 repositories
served by the gpufleet.nvidia test harness (tests/nvidia_sim/repo), signed by
simulated keys; prepare points the repository files at them.
Not shown by this host: SELinux, a RHEL kernel, Rocky's Python and rpm builds.
EOF
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
    local network=none install=""
    case $name in
      ubuntu2204) set -- 22.04 jammy 5 "Jammy Jellyfish" "${SUITE[$from]}" ;;
      ubuntu2404) set -- 24.04 noble 2 "Noble Numbat" "${SUITE[$from]}" ;;
      rocky9) network=host install=$EL_USERLAND ;;
    esac
    container="gpufleet-shape-$name-$$"
    # Files are streamed as "--- <path>" headers followed by their lines.
    { if [ "$name" = rocky9 ]; then rocky_files; else ubuntu_files "$@"; ubuntu_sources "$1" "$2"; fi; } |
      docker run -i --name "$container" --network "$network" -e INSTALL="$install" "$base" /bin/sh -c '
        set -eu
        if [ -n "$INSTALL" ]; then
          apt-get -qq -o APT::Sandbox::User=root update
          # shellcheck disable=SC2086
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o APT::Sandbox::User=root \
            --no-install-recommends $INSTALL >/tmp/apt.log 2>&1 || { tail -n 30 /tmp/apt.log >&2; exit 1; }
          apt-get clean
          rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /tmp/apt.log
          touch -d 2000-01-01 /var/lib/apt/lists
          # An EL host has no Debian release file; its RPM database starts empty.
          rm -f /etc/debian_version
          mkdir -p /var/lib/rpm /etc/pki/rpm-gpg
        fi
        rm -f /etc/apt/sources.list /etc/os-release
        path=""
        while IFS= read -r line; do
          case $line in
            "--- "*) path=${line#--- }; mkdir -p "$(dirname "$path")"; : >"$path" ;;
            *) printf "%s\n" "$line" >>"$path" ;;
          esac
        done
        ln -s ../usr/lib/os-release /etc/os-release
        if [ -f /etc/rocky-release ]; then
          ln -s rocky-release /etc/redhat-release
          ln -s rocky-release /etc/system-release
          chmod 0755 /usr/sbin/alternatives
          mkdir -p /var/lib/alternatives
          rpm --initdb
          # What the Debian userland provides, recorded in the RPM database
          # as one package: rpm checks scriptlet interpreters (/bin/sh) and
          # dependencies against that database only.
          mkdir -p /tmp/userland
          cat >/tmp/userland/u.spec <<SPEC
Name: gpufleet-shaped-userland
Version: 12
Release: 1
Summary: The Debian userland of a Rocky-shaped test host (gpufleet.nvidia)
License: various (Debian packages)
BuildArch: noarch
Provides: /bin/sh, /bin/bash, /usr/bin/sh, /usr/bin/bash, bash, coreutils, glibc, shadow-utils, systemd
Provides: python3, kmod, procps-ng, util-linux, sudo, iproute, gcc, make
Provides: rpm, dnf, python3-dnf, dnf-plugins-core, dracut
%description
Records in the RPM database what the Debian userland of this shaped test
host provides. It ships no file.
%files
SPEC
          rpmbuild -bb --quiet --define "_topdir /tmp/userland" --define "_rpmdir /tmp/userland" \
            /tmp/userland/u.spec >/dev/null
          # Rocky has gnupg2 and ca-certificates as packages of those names,
          # which rpm -qa finds by name (gpufleet.nvidia.host_state_info reads
          # packages that way): record the gnupg and ca-certificates of Debian as
          # such packages, at the Debian upstream versions, shipping no file.
          for pair in gnupg2:gnupg ca-certificates:ca-certificates; do
            rpm_name=${pair%%:*}
            deb_version=$(dpkg-query -W -f "\${Version}" "${pair#*:}" | sed "s/^[0-9]*://; s/-[^-]*$//")
            cat >"/tmp/userland/$rpm_name.spec" <<SPEC
Name: $rpm_name
Version: $deb_version
Release: 0.gpufleet
Summary: ${pair#*:} of Debian on a Rocky-shaped test host (gpufleet.nvidia)
License: various (Debian packages)
BuildArch: noarch
%description
Records the Debian package ${pair#*:} of this shaped test host under the
package name of Rocky. It ships no file.
%files
SPEC
            rpmbuild -bb --quiet --define "_topdir /tmp/userland" --define "_rpmdir /tmp/userland" \
              "/tmp/userland/$rpm_name.spec" >/dev/null
          done
          rpm -i --nosignature /tmp/userland/noarch/*.rpm
          rm -rf /tmp/userland
          # Debian patches dracut to name the image initrd.img-<kernel>; Rocky
          # (and upstream dracut) name it initramfs-<kernel>.img.
          sed -i "s|/boot/initrd.img-\${kernel}\"|/boot/initramfs-\${kernel}.img\"|" /usr/bin/dracut
          grep -q "/boot/initramfs-\${kernel}.img" /usr/bin/dracut
        fi
        echo "$0" >/etc/hostname
      ' "$name" || { docker rm -f "$container" >/dev/null 2>&1; return 1; }
    docker commit --change 'CMD ["/lib/systemd/systemd"]' "$container" "$tag" >/dev/null
    docker rm "$container" >/dev/null
    echo "shaped image $tag: built from $base"
  fi
  docker tag "$tag" "gpufleet/${name}-systemd:latest"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(debian12 debian13 ubuntu2204 ubuntu2404 rocky9)
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
