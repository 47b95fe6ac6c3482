"""What a fault must not lose, read inside a container in one process.

Run on the host with ``python3 - <mode>`` (the source on stdin, see faults.py):

* ``snapshot``: package versions and states, holds, checksums of the
  configuration the roles and the package manager read, the GPU services
  (state and main PID) and the loaded driver: two snapshots taken around a
  refused or rescued run must be equal where nothing may change.
* ``problems``: everything that would make the host inconsistent after a
  fault: dpkg --audit, apt-get check, configuration that no longer parses,
  half-written files left behind, duplicate entries. An empty list is a
  consistent host.

Standard library only (the hosts' python3 is 3.11 or newer: tomllib).
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib

SERVICES = ("nvidia-persistenced", "nvidia-dcgm", "nvidia-dcgm-exporter", "nvidia-fabricmanager")
CONFIG_GLOBS = (
    "/etc/apt/sources.list.d/*", "/etc/apt/keyrings/*", "/etc/apt/preferences.d/*", "/etc/apt/apt.conf.d/*",
    "/etc/modprobe.d/*", "/etc/modules-load.d/*", "/etc/systemd/system/*.service.d/*",
    "/etc/systemd/system/multi-user.target.wants/*", "/etc/docker/daemon.json", "/etc/containerd/config.toml",
    "/etc/containerd/conf.d/*", "/etc/crio/crio.conf", "/etc/crio/crio.conf.d/*", "/etc/crio/conf.d/*",
    "/etc/nvidia-container-runtime/config.toml", "/etc/dcgm-exporter/*",
    # Units the roles and the packages install (the container runtimes', MIG's, the GPU daemons').
    "/etc/systemd/system/*.service", "/etc/systemd/system/*.timer", "/etc/systemd/system/*.socket",
    "/etc/systemd/system/*.path", "/lib/systemd/system/nvidia*", "/lib/systemd/system/dcgm*",
    "/lib/systemd/system/docker*", "/lib/systemd/system/containerd*",
    # DKMS's configuration (module signing) and the CDI specifications.
    "/etc/dkms/*", "/etc/dkms/*/*", "/etc/cdi/*", "/var/run/cdi/*",
)
# Files the package manager or Ansible leave when a write is cut short.
LEFTOVER = re.compile(r"(^\.ansible_tmp|\.dpkg-(new|tmp|dist)$|^\.#|\.tmp\.[0-9]+$)")
LEFTOVER_DIRS = ("/etc", "/usr/local", "/var/lib/gpufleet", "/var/run/cdi")


def run(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=dict(os.environ, LC_ALL="C"), check=False)
    return proc.returncode, proc.stdout


def sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def config_files():
    found = {}
    for pattern in CONFIG_GLOBS:
        for path in sorted(glob.glob(pattern)):
            if os.path.islink(path):
                found[path] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                found[path] = sha256(path)
    return found


def boot_files():
    """What /boot holds: kernels, initramfs images, bootloader files (content, not modification times)."""
    found = {}
    for directory, _dirs, files in os.walk("/boot"):
        for name in files:
            path = os.path.join(directory, name)
            found[path] = ("-> " + os.readlink(path)) if os.path.islink(path) else sha256(path)
    return found


def accounts():
    """Users and groups with their IDs (a role that adds the device-file group must not add it twice)."""
    entries = []
    for path, kind in (("/etc/passwd", "user"), ("/etc/group", "group")):
        with open(path) as handle:
            for line in handle:
                fields = line.rstrip("\n").split(":")
                if len(fields) >= 3:
                    entries.append("%s %s %s" % (kind, fields[0], fields[2]))
    return sorted(entries)


def services():
    state = {}
    for name in SERVICES:
        _rc, text = run(["systemctl", "show", "-p", "LoadState,ActiveState,MainPID", name])
        props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        if props.get("LoadState") == "loaded":
            state[name] = {"active": props.get("ActiveState"), "pid": int(props.get("MainPID") or 0)}
    return state


def snapshot():
    _rc, packages = run(["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n"])
    _rc, holds = run(["apt-mark", "showhold"])
    try:
        with open("/run/nvidia-sim/loaded-driver") as handle:
            loaded = handle.read().strip()
    except OSError:
        loaded = None
    return {
        "boot": boot_files(),
        "accounts": accounts(),
        "packages": sorted(line.strip() for line in packages.splitlines() if line.strip()),
        "holds": sorted(holds.split()),
        "files": config_files(),
        "services": services(),
        "loaded_driver": loaded,
    }


def parse_problems():
    problems = []
    parsers = (("/etc/docker/daemon.json", json.load), ("/var/lib/gpufleet/container-toolkit-cdi.json", json.load))
    for path, parse in parsers:
        if os.path.exists(path):
            try:
                with open(path) as handle:
                    parse(handle)
            except ValueError as exc:
                problems.append("%s does not parse: %s" % (path, exc))
    tomls = ["/etc/containerd/config.toml", "/etc/nvidia-container-runtime/config.toml", "/etc/crio/crio.conf"]
    tomls += glob.glob("/etc/containerd/conf.d/*.toml") + glob.glob("/etc/crio/conf.d/*") + glob.glob("/etc/crio/crio.conf.d/*")
    for path in tomls:
        if os.path.isfile(path):
            try:
                with open(path, "rb") as handle:
                    tomllib.load(handle)
            except tomllib.TOMLDecodeError as exc:
                problems.append("%s does not parse: %s" % (path, exc))
    return problems


def duplicate_problems():
    problems = []
    uris = []
    for path in glob.glob("/etc/apt/sources.list.d/*"):
        with open(path) as handle:
            text = handle.read()
        uris += re.findall(r"(?m)^URIs:\s*(\S+)", text) + re.findall(r"(?m)^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text)
    for uri in sorted(set(u for u in uris if uris.count(u) > 1)):
        problems.append("apt source %s is configured %d times" % (uri, uris.count(uri)))
    if os.path.exists("/etc/docker/daemon.json"):
        with open("/etc/docker/daemon.json") as handle:
            text = handle.read()
        if text.count('"nvidia"') > 2:
            problems.append("daemon.json names the nvidia runtime %d times" % text.count('"nvidia"'))
    if os.path.exists("/etc/containerd/config.toml"):
        with open("/etc/containerd/config.toml", "rb") as handle:
            imports = tomllib.load(handle).get("imports", [])
        if len(imports) != len(set(imports)):
            problems.append("containerd config.toml imports %s" % imports)
    for path in ("/run/reboot-required.pkgs",) + tuple(glob.glob("/etc/modprobe.d/gpufleet-*")) + tuple(
            glob.glob("/etc/modules-load.d/gpufleet-*")):
        if os.path.isfile(path):
            with open(path) as handle:
                lines = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
            if len(lines) != len(set(lines)):
                problems.append("%s has duplicate lines: %s" % (path, lines))
    return problems


def leftover_problems():
    problems = []
    for top in LEFTOVER_DIRS:
        for directory, _dirs, files in os.walk(top):
            for name in files:
                if LEFTOVER.search(name):
                    problems.append("half-written file left behind: %s" % os.path.join(directory, name))
    return problems


def problems():
    found = []
    rc, text = run(["dpkg", "--audit"])
    if rc != 0 or text.strip():
        found.append("dpkg --audit (rc %d): %s" % (rc, text.strip()))
    rc, text = run(["apt-get", "check"])
    if rc != 0:
        found.append("apt-get check (rc %d): %s" % (rc, text.strip()[-500:]))
    return found + parse_problems() + duplicate_problems() + leftover_problems()


if __name__ == "__main__":
    MODE = sys.argv[1] if len(sys.argv) > 1 else "snapshot"
    print(json.dumps(snapshot() if MODE == "snapshot" else problems(), sort_keys=True))
