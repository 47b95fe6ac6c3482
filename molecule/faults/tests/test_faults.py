"""The fault suite: one fault at a time, injected into the two hosts, then what
the collection did about it and whether anything was lost.

The cases run in this order, each leaving the hosts converged (or saying
what it left) for the next:
  1. site.yml interrupted three times on fresh hosts (SIGKILL in the driver's
     package step, SIGINT while the container runtimes are configured,
     SIGKILL while DCGM starts), then run to the end and once more: it
     converges, the initramfs rebuild notified before the first kill happens
     once, nothing is half-written or duplicated, the rerun changes nothing;
  2. the DCGM host engine, its exporter and the persistence daemon killed:
     systemd starts them again;
  3. (a) the NVIDIA repository unreachable, and serving a bad signature;
     (b) a key whose fingerprint is not the pinned one, and a key server
     that does not answer: the role stops at the repository with a message
     saying which, nothing changed, apt works;
  4. nvidia-smi and dcgmi wedged: every role that asks them, and the health
     playbook, stop with a timeout instead of hanging the play;
  5. a broken package in the repository in the middle of a driver upgrade:
     the node is put back (services, holds, pin) and told so, dpkg is clean;
  6. the dpkg lock held by another process: the upgrade waits and succeeds;
  7. the driver/library mismatch this leaves, and a driver that is not
     loaded: facts fail with the reason, site.yml skips what needs the
     driver (reboot policy never), then reboots and converges (if_needed);
  8. a mirror that gains a release after the converge: following the
     security floor refreshes the package lists that lack it and installs it;
  9. a full /boot and /var/cache: the driver change is refused in preflight,
     before anything changes;
 10. unattended-upgrades (Debian's, run for real) allowed to take everything
     from a repository that offers newer drivers: it upgrades another package
     of that repository and leaves the driver at its pinned release;
 11. an expired Release file, and a repository signing with a new key nobody
     announced: the role stops at the repository, nothing changed;
 12. the new key pinned by the operator: the keyring holds it alone, apt
     reads the repository with it, the driver packages stay;
 13. power lost inside dpkg, in the middle of unpacking (HGX) and of
     configuring (L40S) the driver packages: apt refuses to install after the
     restart; the next run finishes dpkg's work (dpkg --configure -a, then
     apt-get --fix-broken install), says so, and converges; dpkg --audit is
     clean;
 14. a reboot that never comes back (the container stays down): the role
     fails after nvidia_driver_reboot_timeout saying what to look at; once
     the host is back, the next run finds the new driver loaded;
 15. a new kernel in /boot without the NVIDIA module, whose headers no
     repository has: the role refuses (no reboot), naming the kernel the
     node would boot; health reports kernel_without_nvidia_module, critical;
 16. the controller killed in the middle of a driver change, after the GPU
     services stopped: the change's record on the node lets the next run
     start them again and hold the driver packages;
 17. the kernel-module package's postinst failing after every package was
     unpacked: the rescue puts the packages installed before back in one apt
     run and names it, with the script's error; nothing else changed;
 18. a GPU falling off the bus (Xid 79, NVML "GPU is lost") while site.yml
     converges: the node stops at the first read that sees it, naming the GPU
     and what to do; health reports the Xid and the lost GPU as critical;
 19. a node lost (unreachable) in the middle of a rolling upgrade: the run
     stops before the next batch; the node stays drained; the next run,
     killed mid-change, leaves it drained; the one after finishes it.
"""
import concurrent.futures
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
import gpu_faults  # noqa: E402  pylint: disable=wrong-import-position,import-error
import unattended_upgrades  # noqa: E402  pylint: disable=wrong-import-position,import-error
from faults import (  # noqa: E402  pylint: disable=wrong-import-position,import-error
    CONVERGE, HGX, HOSTS, L40S, ROLE, SCENARIO_DIR, WORK, Mirror, SigningKey, active, main_pid, out, playbook, problems,
    put, resigned, sh, snapshot, wait_for)

REPO_DIR = os.environ.get("GPUFLEET_TEST_REPO_DIR", "/var/tmp/gpufleet-harness/repo")
DISTRO = {HGX: "debian12", L40S: "debian13"}
DCGM_PORT = {HGX: 5630, L40S: 5631}
EXPORTER_PORT = {HGX: 9440, L40S: 9441}
GPU_SERVICES = {HGX: ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "nvidia-dcgm-exporter"),
                L40S: ("nvidia-persistenced", "nvidia-dcgm", "nvidia-dcgm-exporter")}
# What runs after a branch change made by the driver role alone: Fabric
# Manager's package is of one branch and goes with the old driver's (the role
# says so; its own role installs the new branch's), the others run again.
DRIVER_ROLE_SERVICES = {HGX: ("nvidia-persistenced", "nvidia-dcgm", "nvidia-dcgm-exporter"),
                        L40S: GPU_SERVICES[L40S]}
INITRAMFS_LOG = "/var/log/gpufleet-test/update-initramfs.log"
MODPROBE_FILES = ("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf",)
# What molecule/nvidia_driver/files/daemon.json (put in place by prepare.yml) holds.
DOCKER_BEFORE = {"data-root": "/srv/docker", "live-restore": True, "log-driver": "json-file",
                 "log-opts": {"max-file": "3", "max-size": "100m"}, "registry-mirrors": ["https://mirror.gcr.io"]}
DRIVER_HELD = ("nvidia-driver", "nvidia-open", "nvidia-kernel-open-dkms", "libcuda1", "nvidia-smi")
UNREACHABLE = "http://127.0.0.1:1"
CUDA_SOURCE = "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"
CUDA_KEYRING = "/etc/apt/keyrings/gpufleet-nvidia-cuda.asc"
# Where case 8 serves its mirror (declared on the "# ports:" line of molecule.yml).
MIRROR_PORT = 8790


def task(name, role="nvidia_driver"):
    return r"^gpufleet\.nvidia\.%s : %s$" % (role, re.escape(name))


def mtime(host, path):
    return float(out(host, "stat -c %%.9Y %s" % path).strip())


def initramfs_rebuilds(host):
    return len(sh(host, "cat %s" % INITRAMFS_LOG, check=False).stdout.splitlines())


def engine_address(host):
    """Where the DCGM host engine listens, from its unit's command line (a Unix socket or a TCP port)."""
    command = out(host, "systemctl show -p ExecStart --value nvidia-dcgm")
    socket = re.search(r"(?:--domain-socket|-d) (/\S+)", command)
    port = re.search(r"(?:--port|-p) ([0-9]+)", command)
    return ("unix://" + socket.group(1)) if socket else "127.0.0.1:%s" % (port.group(1) if port else DCGM_PORT[host])


def driver_version(host):
    return out(host, "dpkg-query -W -f='${Version}' nvidia-driver").split("-")[0]


def toolkit_fingerprint():
    with open(os.path.join(REPO_DIR, "keys", "nvidia-container-toolkit-fingerprint")) as handle:
        return handle.read().strip()


def mirror(host, name, damage):
    """A copy of the host's simulated CUDA repository in the container, at
    file:///srv/gpufleet-test/<name>, damaged by a shell command run in it."""
    source = os.path.join(REPO_DIR, "compute", "cuda", "repos", DISTRO[host], "x86_64")
    target = "/srv/gpufleet-test/%s" % name
    sh(host, "rm -rf %s && mkdir -p /srv/gpufleet-test" % target)
    subprocess.run(["docker", "cp", source, "%s:%s" % (host, target)], check=True, timeout=120)
    sh(host, "cd %s && %s" % (target, damage))
    return "file://" + target


def same_except(before, after, ignore_files=()):
    """Keys of two snapshots that differ, files named in ignore_files aside."""
    diff = [key for key in ("packages", "holds", "loaded_driver", "boot", "accounts") if before[key] != after[key]]
    files_before = dict((k, v) for k, v in before["files"].items() if k not in ignore_files)
    files_after = dict((k, v) for k, v in after["files"].items() if k not in ignore_files)
    if files_before != files_after:
        changed = sorted(k for k in set(files_before) | set(files_after) if files_before.get(k) != files_after.get(k))
        diff.append("files %s" % changed)
    return diff


# --- 1. interrupted runs ----------------------------------------------------

def test_1_interrupted_site_runs_converge():
    # SIGKILL while apt installs the driver: the module configuration is
    # written, its initramfs rebuild (a handler) notified but not yet run,
    # and apt goes on in the container without the controller.
    first = playbook("1a-converge-sigkill-driver", CONVERGE,
                     kill=(task("Install the driver packages"), signal.SIGKILL, 2))
    assert first.killed, first
    for host in HOSTS:
        for path in MODPROBE_FILES:
            assert sh(host, "test -f %s" % path, check=False).returncode == 0, (host, path)
        assert initramfs_rebuilds(host) == 0, host

    # Ctrl-C while nvidia-ctk configures the container runtimes.
    second = playbook("1b-converge-sigint-runtime", CONVERGE,
                      kill=(task("Configure the NVIDIA runtime", "container_toolkit"), signal.SIGINT, 1))
    assert second.killed and second.rc != 0, second

    # SIGKILL while systemd starts the DCGM host engine.
    third = playbook("1c-converge-sigkill-dcgm", CONVERGE,
                     kill=(task("Enable and start the host engine", "dcgm"), signal.SIGKILL, 0.5))
    assert third.killed, third

    fourth = playbook("1d-converge", CONVERGE)
    assert fourth.ok(), fourth
    fifth = playbook("1e-converge-again", CONVERGE)
    assert fifth.ok(), fifth
    assert dict((host, fifth.changed(host)) for host in HOSTS) == dict((host, 0) for host in HOSTS), fifth

    for host in HOSTS:
        assert problems(host) == [], host
        # The rebuild the first run notified happened on a rerun, once.
        assert initramfs_rebuilds(host) == 1, host
        initrd = mtime(host, "/boot/initrd.img-$(uname -r)")
        assert all(initrd >= mtime(host, path) for path in MODPROBE_FILES), host
        for unit in GPU_SERVICES[host]:
            assert active(host, unit) == "active", (host, unit)
        assert set(DRIVER_HELD) <= set(out(host, "apt-mark showhold").split()), host
        daemon = json.loads(out(host, "cat /etc/docker/daemon.json"))
        assert dict((k, daemon.get(k)) for k in DOCKER_BEFORE) == DOCKER_BEFORE, (host, daemon)
        assert list(daemon["runtimes"]) == ["nvidia"], (host, daemon)
        # One host engine (its command line: nv-hostengine, not the exporter's nv-hostengine.sock).
        assert out(host, "pgrep -c -f '(^|/| )nv-hostengine( |$)'").strip() == "1", host


# --- 2. killed daemons --------------------------------------------------------

def test_2_killed_gpu_daemons_are_restarted():
    for host in HOSTS:
        for unit in ("nvidia-dcgm-exporter", "nvidia-dcgm", "nvidia-persistenced"):
            before = main_pid(host, unit)
            assert before > 0, (host, unit)
            sh(host, "kill -KILL %d" % before)
            restarted = wait_for(lambda h=host, u=unit, b=before: active(h, u) == "active" and main_pid(h, u) not in (0, b),
                                 timeout=60)
            assert restarted, (host, unit, active(host, unit), out(host, "systemctl status %s || true" % unit))
        # And they work again: persistence on every GPU, the engine answers on its port, the exporter serves.
        modes = out(host, "nvidia-smi --query-gpu=persistence_mode --format=csv,noheader").split()
        assert set(modes) == {"Enabled"}, (host, modes)
        sh(host, "dcgmi discovery --host %s -l" % engine_address(host))
        metrics = wait_for(lambda h=host: sh(h, "python3 -c \"import urllib.request; print(urllib.request.urlopen("
                                                "'http://127.0.0.1:%d/metrics', timeout=10).read().decode())\""
                                                % EXPORTER_PORT[h], check=False).stdout, timeout=60, interval=3)
        assert "DCGM_FI_" in metrics, host
        assert problems(host) == [], host


# --- 3. repository faults -----------------------------------------------------

def repository_round(name, host_vars, expected):
    before = dict((host, snapshot(host)) for host in HOSTS)
    run = playbook(name, ROLE, extra={"fault_role": "nvidia_driver"}, host_vars=host_vars)
    assert run.rc != 0, run
    for host in HOSTS:
        failed = run.failed(host)
        stop_task, words = expected[host]
        assert failed and re.search(stop_task, failed[-1][0]), (host, failed, str(run))
        for word in words:
            assert word in failed[-1][1], (host, word, failed[-1][1])
        after = snapshot(host)
        assert same_except(before[host], after) == [], (host, same_except(before[host], after))
        assert after["services"] == before[host]["services"], host
        assert problems(host) == [], host
        # apt works with every source, and the NVIDIA packages still come from the simulated repository.
        sh(host, "apt-get update -qq")
        policy = out(host, "LC_ALL=C apt-cache policy nvidia-smi")
        installed = re.search(r"Installed: (\S+)", policy).group(1)
        assert "127.0.0.1:8765" in policy and "Candidate: %s\n" % installed in policy, (host, policy)


def test_3a_unreachable_repository_and_bad_signature_stop_at_the_repository():
    badsig = mirror(L40S, "mirror-badsig", "sed -i 's/^Label: .*/Label: tampered/' InRelease Release")
    stop = r"repository : Stop at the repository$"
    repository_round("3a-repository-unreachable-badsig", {
        HGX: {"nvidia_driver_repo_url": UNREACHABLE + "/compute/cuda/repos/debian12/x86_64"},
        L40S: {"nvidia_driver_repo_url": badsig},
    }, {
        HGX: (stop, ["could not be reached", "Connection refused", "was put back", "No package was changed"]),
        L40S: (stop, ["is not signed", "does not verify with the pinned key", "nvidia_driver_repo_key_fingerprint",
                      "was put back"]),
    })


def test_3b_key_not_the_pinned_one_and_key_server_down_stop_at_the_key():
    # A pin that the served key does not have, and a key server that does not answer.
    other = toolkit_fingerprint()
    stop = r"repository : Stop at the repository key$"
    repository_round("3b-repository-key-mismatch-unreachable", {
        HGX: {"nvidia_driver_repo_key_fingerprint": other},
        L40S: {"nvidia_driver_repo_key_fingerprint": other,
               "nvidia_driver_repo_key_url": UNREACHABLE + "/keys/cuda-archive-key.asc"},
    }, {
        HGX: (stop, ["has the fingerprint", "not %s" % other, "nvidia_driver_repo_key_fingerprint",
                     "nothing was changed"]),
        L40S: (stop, ["could not be downloaded", "nvidia_driver_repo_key_url", "Nothing was changed"]),
    })


# --- 4. wedged tools ----------------------------------------------------------

WEDGED = """#!/bin/sh
# Test double (gpufleet.nvidia fault suite): a tool stuck in the driver. It
# never answers and ignores SIGTERM, as a process blocked in an ioctl does;
# only SIGKILL ends it.
trap '' TERM INT HUP
echo "$(date +%s) $0 $*" >> /var/log/gpufleet-test/wedged.log
while :; do sleep 3600; done
"""
# What a call stopped by its timeout reports: a classified failure or finding
# (reason "timeout"), the runner's message, or a bounded command's exit status.
TIMED_OUT = re.compile(r"timed out after|did not (answer|finish) within|\(timeout\)|\btimeout:|"
                       r"\"reason\": \"timeout\"|nvidia_smi_timeout")
TIMED_OUT_RCS = (124, 137, -9)


def stopped_by_timeout(result):
    return result.get("rc") in TIMED_OUT_RCS or bool(TIMED_OUT.search(json.dumps(result)))


def wedge(host, tools):
    for tool in tools:
        sh(host, "mv %s %s.gpufleet-test-real" % (tool, tool))
        put(host, tool, WEDGED, mode="0755")


def unwedge(host, tools):
    for tool in tools:
        sh(host, "mv %s.gpufleet-test-real %s" % (tool, tool))
    # Wedged calls that outlived their callers (none should: counted by the test) end here.
    return int(sh(host, "pkill -KILL -e -f '^sleep 36[0]0$' | grep -c killed", check=False).stdout.strip() or 0)


def wedged_runs(host, name, tools, roles):
    """With tools wedged, each role (and the health playbook) at once: the wait is the timeouts, not CPU."""
    report_dir = os.path.join(WORK, name + "-health-report")
    health = os.path.join(os.path.dirname(os.path.dirname(SCENARIO_DIR)), "playbooks", "health.yml")
    wedge(host, tools)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(roles) + 1) as pool:
            futures = dict((pool.submit(playbook, "%s-%s" % (name, role), ROLE, {"fault_role": role}, None, host,
                                        None, 400), role) for role in roles)
            # The health role's own timeouts are inputs: short ones keep the case short.
            futures[pool.submit(playbook, name + "-health", health,
                                {"health_report_dir": report_dir, "health_nvidia_smi_timeout": 10,
                                 "health_check_timeout": 20}, None, host, None, 400)] = "health"
            runs = dict((futures[future], future.result()) for future in concurrent.futures.as_completed(futures))
    finally:
        leftover = unwedge(host, tools)
    for role, run in sorted(runs.items()):
        assert not run.timed_out, run
        if role == "health":
            continue
        # The role stops at the first wedged call, saying it timed out.
        failed = [result for failed_host, _task, result in run.failures if failed_host == host]
        assert run.rc != 0 and failed, (role, str(run))
        assert stopped_by_timeout(failed[-1]), (role, run.failed(host)[-1], run.log)
    # The health report marks the node unhealthy and says why.
    with open(os.path.join(report_dir, "gpu-health.json")) as handle:
        report = handle.read()
    assert TIMED_OUT.search(report), report
    assert re.search(r"\bunhealthy\b", runs["health"].text), runs["health"]
    assert leftover == 0, "%d wedged calls were still running after their plays ended" % leftover
    return runs


def test_4_wedged_nvidia_smi_and_dcgmi_time_out():
    host = HGX
    before = snapshot(host)
    # nvidia-smi (and dcgmi) wedged: every role stops at its first nvidia-smi call.
    wedged_runs(host, "4a-wedged-smi", ("/usr/bin/nvidia-smi", "/usr/bin/dcgmi"),
                ("nvidia_driver", "persistence_mode", "fabric_manager", "container_toolkit", "dcgm", "dcgm_exporter"))
    # dcgmi alone wedged: the DCGM role's calls and the health check's diagnostic.
    wedged_runs(host, "4b-wedged-dcgmi", ("/usr/bin/dcgmi",), ("dcgm",))
    # Nothing was changed by the roles that stopped.
    after = snapshot(host)
    assert same_except(before, after) == [], same_except(before, after)
    assert after["services"] == before["services"]


# --- 5. a broken package in the middle of an upgrade ----------------------------

def test_5_failed_package_step_puts_the_node_back():
    host = HGX
    broken = mirror(host, "mirror-broken", "for f in libcuda1_580.*.deb; do printf broken | dd of=$f bs=1 seek=100 "
                                           "conv=notrunc 2>/dev/null; done")
    before = snapshot(host)
    run = playbook("5-upgrade-broken-package", ROLE, limit=host,
                   extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "580",
                          "nvidia_driver_repo_url": broken})
    assert run.rc != 0, run
    failed = run.failed(host)
    assert failed and failed[-1][0].endswith("Say what state the node is in"), (failed, str(run))
    message = failed[-1][1]
    for words in ("Hash Sum mismatch", "The node was put back", "apt pin at 570.", "holds restored on",
                  "State now: driver packages at 570.", "(unchanged)", "The GPUs keep working on the driver they had"):
        assert words in message, (words, message)
    restarted = re.search(r"started again: (.*?)(?:; not started|\.\s+State now)", message, re.S)
    assert restarted, message
    assert sorted(restarted.group(1).split(", ")) == sorted(unit + ".service" for unit in GPU_SERVICES[host]), message
    after = snapshot(host)
    # The source now names the mirror (as asked); everything else is as it was.
    assert same_except(before, after, ["/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"]) == [], \
        same_except(before, after, ["/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"])
    for unit in GPU_SERVICES[host]:
        assert after["services"][unit]["active"] == "active", (unit, after["services"])
        # Stopped for the upgrade, so started again: another process.
        assert after["services"][unit]["pid"] != before["services"][unit]["pid"], unit
    assert problems(host) == []


# --- 6. the dpkg lock held by another process ----------------------------------

def test_6_upgrade_waits_for_the_dpkg_lock():
    host = HGX
    hold = 45
    sh(host, "rm -f /run/gpufleet-test-lock.out; mkdir -p /run; "
             "(python3 /usr/local/sbin/gpufleet-test-holdlock %d > /run/gpufleet-test-lock.out 2>&1 &)" % hold)
    assert wait_for(lambda: "locked" in sh(host, "cat /run/gpufleet-test-lock.out", check=False).stdout, 30)
    locked_at = float(out(host, "date +%s.%N"))
    run = playbook("6-upgrade-dpkg-locked", ROLE, limit=host,
                   extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "580"})
    assert run.ok([host]), run
    # dpkg upgraded the driver only after the lock was let go.
    released_at = locked_at + hold
    first_upgrade = out(host, "grep -m1 ' upgrade nvidia-driver:' /var/log/dpkg.log | cut -d' ' -f1,2")
    upgraded_at = float(out(host, "date -d '%s' +%%s" % first_upgrade.strip()))
    assert upgraded_at >= released_at - 1, (first_upgrade, released_at)
    assert driver_version(host).startswith("580."), driver_version(host)
    assert set(DRIVER_HELD) <= set(out(host, "apt-mark showhold").split())
    assert problems(host) == []


# --- 7. driver not usable: mismatch and not loaded --------------------------------

def test_7_unusable_driver_facts_site_and_reboot_policy():
    # HGX: 580 installed by case 6, 570 still loaded (Driver/library version
    # mismatch). L40S: the module unloaded (as after a failed DKMS build).
    for unit in reversed(GPU_SERVICES[L40S]):
        sh(L40S, "systemctl stop %s" % unit)
    sh(L40S, "nvidia-sim-modload --unload")

    facts = playbook("7a-facts", os.path.join(SCENARIO_DIR, "facts.yml"))
    reasons = dict((host, [r.get("reason") for h, _t, r in facts.failures if h == host]) for host in HOSTS)
    assert reasons == {HGX: ["version_mismatch"], L40S: ["driver_not_loaded"]}, (reasons, str(facts))

    branches = {HGX: {"nvidia_driver_branch": "580"}, L40S: {"nvidia_driver_branch": "570"}}
    waiting = playbook("7b-site-reboot-never", CONVERGE, host_vars=branches)
    assert waiting.ok(), waiting
    for host in HOSTS:
        assert waiting.ran_for(host, r"Say which roles wait for the reboot"), host
        assert not waiting.ran_for(host, r"^gpufleet\.nvidia\.(container_toolkit|dcgm|dcgm_exporter) :"), host
    assert "no NVIDIA kernel module is loaded" in waiting.text
    assert "Driver/library version mismatch" in waiting.text

    restarts = dict((host, int(subprocess.check_output(["docker", "inspect", "-f", "{{.RestartCount}}", host],
                                                       universal_newlines=True))) for host in HOSTS)
    rebooted = playbook("7c-site-reboot-if-needed", CONVERGE, extra={"nvidia_driver_reboot_policy": "if_needed"},
                        host_vars=branches)
    assert rebooted.ok(), rebooted
    for host in HOSTS:
        count = int(subprocess.check_output(["docker", "inspect", "-f", "{{.RestartCount}}", host],
                                            universal_newlines=True))
        assert count == restarts[host] + 1, host
        loaded = out(host, "cat /run/nvidia-sim/loaded-driver").strip()
        assert loaded == driver_version(host), host
        for unit in GPU_SERVICES[host]:
            assert active(host, unit) == "active", (host, unit)
        assert problems(host) == [], host
    assert driver_version(HGX).startswith("580.") and driver_version(L40S).startswith("570.")


# --- 8. the mirror gains a release after the converge --------------------------

def loaded_driver(host):
    return out(host, "cat /run/nvidia-sim/loaded-driver").strip()


def test_8_mirror_gains_a_release_and_the_security_floor_installs_it():
    # L40S, at 570 since case 7. Its driver moves to branch 580 from a mirror
    # served as it was before NVIDIA published 580.95.05 (the simulated
    # repository's snapshot, tests/nvidia_sim/repo/catalog.py); the mirror then
    # synchronises and serves 580.95.05 at the same URL. The source does not
    # change, so nothing refreshed apt's lists since: preflight sees 580.95.05
    # in the repository's own index, apt's lists do not have it.
    host = L40S
    repos = os.path.join("compute", "cuda", "repos", DISTRO[host], "x86_64")
    older = os.path.join(REPO_DIR, "snapshots", "before-newest-drivers", repos)
    assert os.path.isdir(older), "the simulated repository has no snapshot at %s: rebuild it" % older
    with Mirror("8-mirror", MIRROR_PORT) as served:
        url = served.publish(DISTRO[host], older)
        inputs = {"fault_role": "nvidia_driver", "nvidia_driver_branch": "580", "nvidia_driver_repo_url": url,
                  "nvidia_driver_reboot_policy": "if_needed",
                  # The release the mirror gains is the one that fixes the branch.
                  "nvidia_driver_security_floors": {"580": "580.95.05"}}
        converge = playbook("8a-converge-from-the-mirror", ROLE, limit=host, extra=inputs)
        assert converge.ok([host]), converge
        assert (driver_version(host), loaded_driver(host)) == ("580.82.07", "580.82.07"), converge

        served.publish(DISTRO[host], os.path.join(REPO_DIR, repos))
        lists = out(host, "LC_ALL=C apt-cache madison nvidia-driver")
        assert "580.82.07" in lists and "580.95.05" not in lists, lists
        before = snapshot(host)

        follow = playbook("8b-follow-the-security-floor", ROLE, limit=host,
                          extra=dict(inputs, nvidia_driver_follow_security_floor=True))
        assert follow.ok([host]), follow
        # The lists were refreshed because they lacked the release, and it was installed.
        refreshed = r"Refreshed the package lists of \S+: they lack [^\n\"]*\bnvidia-driver 580\.95\.05\b"
        assert re.search(refreshed, follow.text), follow
        assert driver_version(host) == "580.95.05", (driver_version(host), follow)
        assert loaded_driver(host) == "580.95.05", follow
        assert set(DRIVER_HELD) <= set(out(host, "apt-mark showhold").split()), host
        after = snapshot(host)
        assert after["packages"] != before["packages"], "the driver packages did not change"
        assert problems(host) == [], host

    # The mirror is gone with the case: the source names the simulated repository again, and apt works.
    back = playbook("8c-back-to-the-repository", ROLE, limit=host,
                    extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "580"})
    assert back.ok([host]), back
    assert back.changed(host) > 0, back
    sh(host, "apt-get update -qq")
    assert driver_version(host) == "580.95.05"
    assert problems(host) == [], host


# --- 9. a full /boot and /var/cache ----------------------------------------------

def test_9_full_boot_and_var_cache_are_refused_before_the_change():
    # HGX, at 580 since case 6. /boot and /var/cache become small file systems
    # holding what they held, with room for less than a driver change needs
    # (an initramfs per kernel, the downloaded packages): the change to 570 is
    # refused in preflight, before the repository, the packages or a service
    # is touched, and the message names each path, its free space and the input.
    host = HGX
    mounts = {"/boot": 40, "/var/cache": 100}
    before = snapshot(host)
    for path, headroom in mounts.items():
        sh(host, "used=$(du -sm %(p)s | cut -f1); cp -a %(p)s /tmp/gpufleet-full && "
                 "mount -t tmpfs -o size=$((used + %(h)d))m gpufleet-full %(p)s && cp -a /tmp/gpufleet-full/. %(p)s/ && "
                 "rm -rf /tmp/gpufleet-full" % {"p": path, "h": headroom})
    try:
        run = playbook("9-full-boot-and-var-cache", ROLE, limit=host,
                       extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "570"})
        assert run.rc != 0, run
        failed = run.failed(host)
        assert failed, str(run)
        assert failed[-1][0].endswith("Check there is room for the driver packages"), (failed, str(run))
        message = failed[-1][1]
        for words in ["Not enough free space for the driver packages", "nvidia_driver_min_free_mib", "Nothing was changed"] + [
                "%s has " % path for path in mounts]:
            assert words in message, (words, message)
        assert run.changed(host) == 0, run
        after = snapshot(host)
        assert same_except(before, after) == [], same_except(before, after)
        assert after["services"] == before["services"]
        assert problems(host) == []
    finally:
        for path in mounts:
            sh(host, "umount %s" % path, check=False)
    assert driver_version(host).startswith("580."), driver_version(host)


# --- 10. unattended-upgrades and a repository offering newer drivers -------------

UU_CONFIG = "/etc/apt/apt.conf.d/52gpufleet-test-unattended-upgrades"
# A package of the NVIDIA repository that no role pins or holds: unattended-upgrades
# must upgrade it, which shows it runs and takes that repository (not a vacuous pass).
UU_CONTROL = ("cuda-toolkit-config-common", "12.4.127-1", "13.0.96-1")


def package_version(host, name):
    return sh(host, "dpkg-query -W -f='${Version}' %s" % name, check=False).stdout.strip()


def test_10_unattended_upgrades_keep_the_driver_at_its_pin():
    # HGX, at 580 since case 6. The driver moves to 570.172.08 while the
    # repository offers 570.195.03 and the 580s; unattended-upgrades (Debian's
    # real one) is then allowed everything the repository serves, as an
    # operator who turned it on for the NVIDIA repository would, and runs as
    # apt-daily-upgrade runs it: a dry run, then for real.
    host = HGX
    run = playbook("10a-driver-at-an-older-release", ROLE, limit=host,
                   extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "570",
                          "nvidia_driver_version": "570.172.08", "nvidia_driver_reboot_policy": "if_needed"})
    assert run.ok([host]), run
    assert (driver_version(host), loaded_driver(host)) == ("570.172.08", "570.172.08"), run
    name, older, newest = UU_CONTROL
    sh(host, "apt-get install -y -q --allow-downgrades %s=%s" % (name, older))
    # Only the NVIDIA repository (the simulated one, on loopback): Debian's own
    # security updates would make the run depend on the day.
    put(host, UU_CONFIG, "#clear Unattended-Upgrade::Origins-Pattern;\n#clear Unattended-Upgrade::Allowed-Origins;\n"
                         "Unattended-Upgrade::Origins-Pattern { \"site=127.0.0.1\"; };\n")
    sh(host, "apt-get update -qq")
    offered = out(host, "LC_ALL=C apt-cache madison nvidia-driver")
    assert "570.195.03" in offered and "580.95.05" in offered, offered
    before = snapshot(host)

    dry = sh(host, "unattended-upgrade --dry-run -d 2>&1", check=False, timeout=600)
    assert dry.returncode == 0, dry.stdout[-3000:]
    allowed = re.search(r"(?m)^Allowed origins are: (.*)$", dry.stdout)
    assert allowed and allowed.group(1).strip() == "site=127.0.0.1", dry.stdout[-3000:]
    blacklist = re.search(r"(?m)^Initial blacklist: (.*)$", dry.stdout)
    assert blacklist and {"nvidia-", "libnvidia-", "libcuda1"} <= set(blacklist.group(1).split()), dry.stdout[-3000:]
    assert unattended_upgrades.candidates(dry.stdout) == [name], unattended_upgrades.summary(dry.stdout)
    assert package_version(host, name) == older

    real = sh(host, "unattended-upgrade -d 2>&1", check=False, timeout=600)
    assert real.returncode == 0, real.stdout[-3000:]
    log = out(host, "cat /var/log/unattended-upgrades/unattended-upgrades.log")
    upgraded = re.findall(r"(?m)Packages that will be upgraded: (.*)$", log)
    assert upgraded and upgraded[-1].split() == [name], log[-3000:]
    assert package_version(host, name) == newest
    # The driver stays at its release: the pin, the holds and the blacklist.
    assert (driver_version(host), loaded_driver(host)) == ("570.172.08", "570.172.08")
    after = snapshot(host)
    assert after["holds"] == before["holds"] and set(DRIVER_HELD) <= set(after["holds"]), after["holds"]
    changed = sorted(set(before["packages"]) ^ set(after["packages"]))
    assert [line.split()[0] for line in changed] == [name, name], changed
    assert same_except(dict(before, packages=[]), dict(after, packages=[])) == [], same_except(before, after)
    assert problems(host) == []
    # The control package goes back, so that later cases see the host as the role left it.
    sh(host, "apt-get install -y -q --allow-downgrades %s=%s && apt-get purge -y -q %s && rm -f %s"
       % (name, older, name, UU_CONFIG))


# --- 11. an expired Release and an unannounced key rotation ----------------------

def release_time(days):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days)


@pytest.fixture(scope="module")
def rotated_key():
    key = SigningKey("gpufleet fault suite: the CUDA repository's next key")
    yield key
    key.close()


def test_11_expired_release_and_unannounced_key_rotation_stop_at_the_repository(rotated_key):
    # HGX: a mirror that stopped synchronising a week ago, its Release signed by
    # the key the host pins, valid until yesterday. L40S: the repository signs
    # with a new key that nobody announced; the host pins the old one.
    with Mirror("11-rotated", MIRROR_PORT) as served:
        for host, expired in ((HGX, True), (L40S, False)):
            source = os.path.join(REPO_DIR, "compute", "cuda", "repos", DISTRO[host], "x86_64")
            copy = resigned(source, os.path.join(WORK, "11-%s" % DISTRO[host]), rotated_key,
                            date=release_time(-8) if expired else None,
                            valid_until=release_time(-1) if expired else release_time(7))
            served.publish(DISTRO[host], copy)
        key_url = served.put("keys/next-cuda-key.asc", rotated_key.armored())
        stop = r"repository : Stop at the repository$"
        repository_round("11-expired-release-rotated-key", {
            HGX: {"nvidia_driver_repo_url": served.url(DISTRO[HGX]), "nvidia_driver_repo_key_url": key_url,
                  "nvidia_driver_repo_key_fingerprint": rotated_key.fingerprint},
            L40S: {"nvidia_driver_repo_url": served.url(DISTRO[L40S])},
        }, {
            HGX: (stop, ["is expired", "past its Valid-Until date", "Resynchronise the mirror", "was put back",
                         "the keyring that was there before was put back", "No package was changed"]),
            # Debian 13's apt verifies with sqv, which names the missing key in words of its own.
            L40S: (stop, ["does not verify with the pinned key", "nvidia_driver_repo_key_fingerprint",
                          "was put back", "No package was changed"]),
        })


def test_12_key_rotation_pinned_by_the_operator_is_followed(rotated_key):
    # L40S: the operator confirms the new key out of band and pins it. The
    # keyring then holds the new key alone, apt reads the repository with it,
    # and the old key is trusted by nothing.
    host = L40S
    with Mirror("12-rotated", MIRROR_PORT) as served:
        source = os.path.join(REPO_DIR, "compute", "cuda", "repos", DISTRO[host], "x86_64")
        served.publish(DISTRO[host], resigned(source, os.path.join(WORK, "12-%s" % DISTRO[host]), rotated_key,
                                              valid_until=release_time(7)))
        inputs = {"fault_role": "nvidia_driver", "nvidia_driver_branch": "580",
                  "nvidia_driver_repo_url": served.url(DISTRO[host]),
                  "nvidia_driver_repo_key_url": served.put("keys/next-cuda-key.asc", rotated_key.armored()),
                  "nvidia_driver_repo_key_fingerprint": rotated_key.fingerprint}
        before = snapshot(host)
        run = playbook("12a-pin-the-rotated-key", ROLE, limit=host, extra=inputs)
        assert run.ok([host]), run
        assert rotated_key.fingerprints(out(host, "cat %s" % CUDA_KEYRING)) == [rotated_key.fingerprint]
        assert "Signed-By: %s" % CUDA_KEYRING in out(host, "cat %s" % CUDA_SOURCE)
        sh(host, "apt-get update -qq --error-on=any")
        # Nothing but the repository's source and key changed: the driver packages stay.
        after = snapshot(host)
        assert after["packages"] == before["packages"] and after["holds"] == before["holds"]
        assert sorted(k for k in set(before["files"]) | set(after["files"])
                      if before["files"].get(k) != after["files"].get(k)) == sorted([CUDA_SOURCE, CUDA_KEYRING])
        again = playbook("12b-pin-the-rotated-key-again", ROLE, limit=host, extra=inputs)
        assert again.ok([host]) and again.changed(host) == 0, again
    # Back to the simulated repository and its key.
    back = playbook("12c-back-to-the-repository", ROLE, limit=host,
                    extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "580"})
    assert back.ok([host]), back
    sh(host, "apt-get update -qq --error-on=any")
    assert problems(host) == [], host


# --- 13. power lost during dpkg: mid-unpack and mid-configure --------------------

# Waits, in the container, for dpkg's log to show the given line for a
# driver package, then freezes dpkg (SIGSTOP) exactly there and says so: the
# test then kills the container, as a power cut would. Freezing first makes
# the moment of the cut the moment seen, not that plus the test's reaction
# time. Unpacking: "status half-installed <package>". Configuring: the
# "configure <package>" action, which dpkg logs only in its configure phase
# (a downgrade's unpack phase also logs "status half-configured" for the
# version it replaces).
POWER_CUT_WATCH = """#!/bin/sh
start=$(wc -l < /var/log/dpkg.log)
while :; do
    if tail -n +$((start + 1)) /var/log/dpkg.log | grep -Eq " $1 (nvidia|libnvidia|libcuda)"; then
        pkill -STOP -x dpkg
        tail -n +$((start + 1)) /var/log/dpkg.log > /var/lib/gpufleet-test-power-cut
        exit 0
    fi
    sleep 0.05
done
"""
CUT_AT = {HGX: "status half-installed", L40S: "configure"}


def power_cut_when_frozen(host, stop):
    """Kill the container once its watcher froze dpkg; True when it did before stop was set."""
    while not stop.is_set():
        if sh(host, "test -s /var/lib/gpufleet-test-power-cut", check=False).returncode == 0:
            subprocess.run(["docker", "kill", host], check=True, timeout=60, stdout=subprocess.DEVNULL)
            return True
        stop.wait(0.5)
    return False


def boot(host):
    subprocess.run(["docker", "start", host], check=True, timeout=120, stdout=subprocess.DEVNULL)

    def up():
        return sh(host, "systemctl is-system-running", check=False).stdout.strip() in ("running", "degraded")
    assert wait_for(up, timeout=120), (host, out(host, "systemctl --failed || true"))


@pytest.fixture(scope="module")
def power_cut():
    """Both driver changes (HGX 570 -> 580, L40S 580 -> 570) lose power inside
    dpkg: HGX while it unpacks the driver packages, L40S while it configures
    them (one run, both hosts, so the two cases share its time). After the
    power comes back, what the cut left is read; then the next run."""
    for host in HOSTS:
        put(host, "/usr/local/sbin/gpufleet-test-power-cut-watch", POWER_CUT_WATCH, mode="0755")
        sh(host, "rm -f /var/lib/gpufleet-test-power-cut; (setsid /usr/local/sbin/gpufleet-test-power-cut-watch '%s' "
                 "> /dev/null 2>&1 &)" % CUT_AT[host])
    branches = {HGX: {"nvidia_driver_branch": "580"}, L40S: {"nvidia_driver_branch": "570"}}
    stop = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:
        cuts = dict((host, pool.submit(power_cut_when_frozen, host, stop)) for host in HOSTS)
        cut_run = playbook("13-power-cut-in-dpkg", ROLE, extra={"fault_role": "nvidia_driver"}, host_vars=branches)
        stop.set()
        cut = dict((host, cuts[host].result()) for host in HOSTS)
    left = {}
    for host in HOSTS:
        if not cut[host]:
            continue
        boot(host)
        left[host] = {
            "seen": out(host, "cat /var/lib/gpufleet-test-power-cut"),
            "audit": out(host, "dpkg --audit").strip(),
            "install": sh(host, "LC_ALL=C apt-get install -y -q nvidia-smi 2>&1", check=False),
        }
    run = playbook("13-after-the-power-cut", ROLE,
                   extra={"fault_role": "nvidia_driver", "nvidia_driver_reboot_policy": "if_needed"},
                   host_vars=branches)
    again = playbook("13-again", ROLE, extra={"fault_role": "nvidia_driver"}, host_vars=branches)
    for host in HOSTS:
        sh(host, "rm -f /var/lib/gpufleet-test-power-cut /usr/local/sbin/gpufleet-test-power-cut-watch", check=False)
    return {"cut_run": cut_run, "cut": cut, "left": left, "run": run, "again": again}


def check_power_cut(result, host, expected):
    assert result["cut"][host], ("dpkg was never frozen at %s" % CUT_AT[host], result["cut_run"])
    left = result["left"][host]
    assert re.search(r" %s (nvidia|libnvidia|libcuda)" % CUT_AT[host], left["seen"]), (host, left["seen"])
    # What the cut left: dpkg's audit names unfinished packages, and apt refuses to install.
    assert left["audit"], host
    assert left["install"].returncode != 0 and "dpkg --configure -a" in left["install"].stdout, (host, left["install"])
    run = result["run"]
    # Per host: the other host's case is judged on its own.
    assert run.recap.get(host, {}).get("failed") == 0 and run.recap[host]["unreachable"] == 0, run
    assert run.ran_for(host, r"nvidia_driver : Finish the package work an interrupted dpkg left"), (host, run)
    assert re.search(r"finish_package_work: dpkg --configure -a", run.text), run
    assert (driver_version(host), loaded_driver(host)) == (expected, expected), (host, run)
    assert out(host, "dpkg --audit").strip() == "", host
    assert set(DRIVER_HELD) <= set(out(host, "apt-mark showhold").split()), host
    for unit in DRIVER_ROLE_SERVICES[host]:
        assert active(host, unit) == "active", (host, unit)
    assert problems(host) == [], host
    again = result["again"]
    assert again.recap.get(host, {}).get("failed") == 0 and again.changed(host) == 0, again


def test_13a_power_lost_while_dpkg_unpacks_is_finished_by_the_next_run(power_cut):
    # apt refuses to install after the restart ("dpkg was interrupted"); the
    # next run finishes dpkg's work first, says so, and converges.
    check_power_cut(power_cut, HGX, "580.95.05")


def test_13b_power_lost_while_dpkg_configures_is_finished_by_the_next_run(power_cut):
    check_power_cut(power_cut, L40S, "570.195.03")


# --- 14. a reboot that never comes back -------------------------------------------

def restart_policy(host, policy=None):
    if policy is not None:
        subprocess.run(["docker", "update", "--restart", policy, host], check=True, timeout=60,
                       stdout=subprocess.DEVNULL)
    return subprocess.check_output(["docker", "inspect", "-f", "{{.HostConfig.RestartPolicy.Name}}", host],
                                   universal_newlines=True, timeout=60).strip()


def test_14_reboot_that_never_comes_back_fails_with_what_to_do():
    # HGX, at 580.95.05 since case 13, moves to 570 with reboots allowed. The
    # container's restart policy is taken away first, so its reboot stops it
    # for good: a host stuck in POST. The role waits nvidia_driver_reboot_timeout
    # and fails saying so; once the host is started again, the next run
    # finds the new driver loaded and changes nothing but what it must.
    host = HGX
    inputs = {"fault_role": "nvidia_driver", "nvidia_driver_branch": "570", "nvidia_driver_reboot_policy": "if_needed"}
    policy = restart_policy(host)
    restart_policy(host, "no")
    try:
        run = playbook("14a-reboot-never-returns", ROLE, limit=host, extra=dict(inputs, nvidia_driver_reboot_timeout=45))
    finally:
        restart_policy(host, policy)
    assert run.rc != 0, run
    failed = run.failed(host)
    assert failed and failed[-1][0].endswith("Say the host did not come back from the reboot"), (failed, str(run))
    for words in ("did not come back within 45 s (nvidia_driver_reboot_timeout)", "installed and held",
                  "console", "run the role again"):
        assert words in failed[-1][1], (words, failed[-1][1])
    assert subprocess.check_output(["docker", "inspect", "-f", "{{.State.Running}}", host],
                                   universal_newlines=True).strip() == "false"

    boot(host)
    again = playbook("14b-after-the-host-is-back", ROLE, limit=host, extra=inputs)
    assert again.ok([host]), again
    assert (driver_version(host), loaded_driver(host)) == ("570.195.03", "570.195.03"), again
    assert not again.ran_for(host, r"Reboot to load the new driver"), again
    for unit in DRIVER_ROLE_SERVICES[host]:
        assert active(host, unit) == "active", (host, unit)
    assert problems(host) == [], host


# --- 15. a new kernel without the NVIDIA module -----------------------------------

def findings_with(node, code):
    """Every finding with code in a health report's JSON, wherever it sits."""
    found = []
    if isinstance(node, dict):
        if node.get("code") == code:
            found.append(node)
        for value in node.values():
            found.extend(findings_with(value, code))
    elif isinstance(node, list):
        for value in node:
            found.extend(findings_with(value, code))
    return found


def test_15_new_kernel_without_the_module_refuses_the_reboot_and_is_a_finding():
    # HGX. A kernel upgrade (a package the repositories of this host do not
    # carry headers for) put a newer kernel in /boot, which the bootloader
    # starts next: the kernel image, its initramfs and its modules directory,
    # with depmod's index listing no NVIDIA module. The kernel is simulated
    # (the container has none of its own); DKMS and the role's checks are not.
    host = HGX
    # The running kernel (the test machine's; its modules.dep lists the
    # simulated DKMS module) gets its image in /boot, as on a real host, and
    # the new kernel is the next minor release, so the bootloader's default.
    running = out(host, "uname -r").strip()
    major, minor = (int(part) for part in re.match(r"([0-9]+)\.([0-9]+)", running).groups())
    new_kernel = "%d.%d.0-99-amd64" % (major, minor + 1)
    sh(host, "mkdir -p /lib/modules/{k}/kernel && : > /lib/modules/{k}/modules.dep && "
             "printf 'simulated kernel image\\n' > /boot/vmlinuz-{k} && printf 'initramfs\\n' > /boot/initrd.img-{k} && "
             "printf 'simulated kernel image\\n' > /boot/vmlinuz-{r}".format(k=new_kernel, r=running))
    restarts = int(subprocess.check_output(["docker", "inspect", "-f", "{{.RestartCount}}", host],
                                           universal_newlines=True))
    try:
        before = snapshot(host)
        run = playbook("15a-new-kernel-without-module", ROLE, limit=host,
                       extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "570",
                              "nvidia_driver_reboot_policy": "if_needed"})
        assert run.rc != 0, run
        failed = run.failed(host)
        assert failed and failed[-1][0].endswith("Check every kernel has the NVIDIA module"), (failed, str(run))
        for words in ("for kernel(s) %s" % new_kernel, "the node would boot %s, the default of the bootloader" % new_kernel,
                      "without an NVIDIA driver", "No reboot is done or allowed",
                      "or in the repositories for linux-headers-%s" % new_kernel, "nvidia_driver_hold_kernel"):
            assert words in failed[-1][1], (words, failed[-1][1])
        assert int(subprocess.check_output(["docker", "inspect", "-f", "{{.RestartCount}}", host],
                                           universal_newlines=True)) == restarts, "the host was rebooted"
        after = snapshot(host)
        assert same_except(before, after) == [], same_except(before, after)

        report_dir = os.path.join(WORK, "15b-health-report")
        health = os.path.join(os.path.dirname(os.path.dirname(SCENARIO_DIR)), "playbooks", "health.yml")
        checked = playbook("15b-health", health, limit=host, extra={"health_report_dir": report_dir})
        with open(os.path.join(report_dir, "gpu-health.json")) as handle:
            report = json.load(handle)
        found = findings_with(report, "kernel_without_nvidia_module")
        assert found and all(f.get("severity") == "critical" for f in found), (found, str(checked))
        assert new_kernel in json.dumps(found), found
    finally:
        sh(host, "rm -rf /lib/modules/{k} /boot/vmlinuz-{k} /boot/initrd.img-{k} /boot/vmlinuz-{r}".format(
            k=new_kernel, r=running))
    # The kernel gone (removed, as the message offers), the role passes the check again.
    passed = playbook("15c-kernel-removed", ROLE, limit=host,
                      extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "570"})
    assert passed.ok([host]) and passed.changed(host) == 0, passed
    assert problems(host) == [], host


# --- 16. the controller dies in the middle of a driver change -----------------------

CHANGE_RECORD = "/var/lib/gpufleet/nvidia-driver-change.json"


def package_manager_idle(host):
    return sh(host, "pgrep -x apt-get || pgrep -x dpkg || pgrep -x apt-mark", check=False).returncode != 0


def test_16_controller_killed_mid_change_the_next_run_restores_services_and_holds():
    # L40S, at 570.195.03 since case 13. A change to 580 is killed (SIGKILL
    # of the whole controller, as a cancelled AWX job or a dead controller
    # VM) once it has stopped the GPU services and while it releases the
    # holds. The operator then runs the role again at the branch the node
    # has: the change is abandoned, and that run starts what the dead one
    # stopped and holds the driver packages again.
    host = L40S
    killed = playbook("16a-change-killed", ROLE, limit=host,
                      extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "580"},
                      kill=(task("Release the holds on the installed driver packages for the driver change"),
                            signal.SIGKILL, 0))
    assert killed.killed, killed
    assert wait_for(lambda: package_manager_idle(host), timeout=120)
    assert driver_version(host) == "570.195.03"
    record = json.loads(out(host, "cat %s" % CHANGE_RECORD))
    assert record["from"] == "570.195.03" and record["to"].startswith("580."), record
    assert sorted(record["stopped"]) == sorted(unit + ".service" for unit in GPU_SERVICES[host]), record
    for unit in GPU_SERVICES[host]:
        assert active(host, unit) != "active", (host, unit)

    resumed = playbook("16b-next-run", ROLE, limit=host,
                       extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "570"})
    assert resumed.ok([host]), resumed
    assert re.search(r"resume_interrupted_change: the change to 580\.\S+ started \S+ did not finish", resumed.text), resumed
    for unit in GPU_SERVICES[host]:
        assert active(host, unit) == "active", (host, unit)
    assert set(DRIVER_HELD) <= set(out(host, "apt-mark showhold").split()), host
    assert sh(host, "test -e %s" % CHANGE_RECORD, check=False).returncode != 0, "the record outlived the run"
    assert driver_version(host) == "570.195.03" and loaded_driver(host) == "570.195.03"
    assert problems(host) == [], host
    again = playbook("16c-again", ROLE, limit=host, extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "570"})
    assert again.ok([host]) and again.changed(host) == 0, again


# --- 17. a maintainer script fails after the packages were unpacked ------------------

def test_17_failing_dkms_postinst_after_the_unpack_is_rolled_back():
    # L40S, at 570.195.03 since case 16, moves to 580. Every package of 580
    # unpacks; then the kernel-module package's postinst fails in its DKMS
    # step (the simulated package's DKMS imitation cannot create the module's
    # tree, which a file of the same name blocks: a real dpkg maintainer
    # script failing with exit status 1, as a module that does not build for
    # the kernel makes Debian's DKMS postinst fail). dpkg leaves the module
    # package half-configured and the packages that depend on it unpacked.
    # The role's rescue puts the packages installed before back in one apt
    # run, says which command it ran, and the node is as it was.
    host = L40S
    tree = "/var/lib/dkms/nvidia/580.95.05"
    before = snapshot(host)
    log_lines = int(out(host, "wc -l < /var/log/dpkg.log").strip())
    sh(host, "rm -rf %s && mkdir -p $(dirname %s) && echo 'test fault: blocks the DKMS tree' > %s" % (tree, tree, tree))
    try:
        run = playbook("17a-postinst-fails", ROLE, limit=host,
                       extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "580"})
    finally:
        sh(host, "test -d %s || rm -f %s" % (tree, tree))
    assert run.rc != 0, run
    failed = run.failed(host)
    assert failed and failed[-1][0].endswith("Say what state the node is in"), (failed, str(run))
    message = failed[-1][1]
    for words in ("dpkg: nvidia-kernel-open-dkms: installed nvidia-kernel-open-dkms package post-installation script "
                  "subprocess returned error exit status 1", "File exists",
                  "packages rolled back with apt-get", "--allow-downgrades install",
                  "nvidia-kernel-open-dkms=570.195.03-1", "apt pin at 570.195.03", "holds restored on",
                  "State now: driver packages at 570.195.03 (unchanged)", "The GPUs keep working on the driver they had"):
        assert words in message, (words, message)
    # The fault came after the unpack: dpkg had 580 in place and was configuring it.
    dpkg_log = out(host, "tail -n +%d /var/log/dpkg.log" % (log_lines + 1))
    assert re.search(r" status half-configured nvidia-kernel-open-dkms:amd64 580\.95\.05-1$", dpkg_log, re.M), dpkg_log
    assert re.search(r" status unpacked nvidia-driver:amd64 580\.95\.05-1$", dpkg_log, re.M), dpkg_log
    after = snapshot(host)
    assert same_except(before, after) == [], same_except(before, after)
    for unit in GPU_SERVICES[host]:
        assert after["services"][unit]["active"] == "active", (unit, after["services"])
    assert (driver_version(host), loaded_driver(host)) == ("570.195.03", "570.195.03")
    assert problems(host) == [], host
    again = playbook("17b-again", ROLE, limit=host, extra={"fault_role": "nvidia_driver", "nvidia_driver_branch": "570"})
    assert again.ok([host]) and again.changed(host) == 0, again


# --- 18. a GPU falls off the bus during the converge ------------------------------------

KERN_LOG = "/run/gpufleet-test/kern.log"


def nvml_device_error(host, index, error):
    """Make NVML fail to open a simulated GPU with error (None: open it again), keeping the rest of its state."""
    sh(host, "python3 -", stdin=gpu_faults.nvml_device_error_script(index, error))


def test_18_gpu_fallen_off_the_bus_during_the_converge_stops_the_node_and_is_a_finding():
    # HGX. site.yml runs; when the persistence role starts (the driver role
    # done), GPU 3 falls off the bus: NVML cannot open it ("GPU is lost",
    # nvidia-smi exits 15) and the driver logs Xid 79. The GPU is simulated;
    # the roles' reads and what they do about it are not. The run must stop
    # for the node at the first read that sees it, naming the GPU and what to
    # do, with nothing changed after it; health.yml reports the Xid and the
    # lost GPU as critical. Once the GPU is back (the node rebooted), site.yml
    # converges.
    host = HGX
    bus = out(host, "nvidia-smi -i 3 --query-gpu=pci.bus_id --format=csv,noheader").strip()
    seen = {}

    def fall_off_the_bus():
        seen["snapshot"] = snapshot(host)
        nvml_device_error(host, 3, "GPU is lost")
        put(host, KERN_LOG, gpu_faults.xid79(bus, uptime="4711.000001"))

    try:
        run = playbook("18a-gpu-lost-during-converge", CONVERGE, limit=host,
                       at=(r"^gpufleet\.nvidia\.persistence_mode : Inputs$", fall_off_the_bus))
        assert run.injected, run
        assert run.rc != 0, run
        failed = run.failed(host)
        assert failed and failed[-1][0].startswith("gpufleet.nvidia.persistence_mode"), (failed, str(run))
        message = failed[-1][1]
        for words in ("fallen off the bus", "Drain the node", "Xid 79", "reboot"):
            assert words in message, (words, message)
        assert ("gpu %s:" % bus.lower()[-12:]) in message.lower(), message
        # Nothing ran for the node after the read that failed.
        tasks = run.tasks()
        later = [t for t in tasks[tasks.index(failed[-1][0]) + 1:] if not t.startswith("gpufleet.nvidia.persistence_mode")]
        assert not any(run.ran_for(host, re.escape(t)) for t in later), later
        after = snapshot(host)
        assert same_except(seen["snapshot"], after) == [], same_except(seen["snapshot"], after)

        report_dir = os.path.join(WORK, "18b-health-report")
        health = os.path.join(os.path.dirname(os.path.dirname(SCENARIO_DIR)), "playbooks", "health.yml")
        checked = playbook("18b-health", health, limit=host,
                           extra={"health_report_dir": report_dir, "health_kernel_log_source": "file",
                                  "health_kernel_log_path": KERN_LOG})
        with open(os.path.join(report_dir, "gpu-health.json")) as handle:
            report = json.load(handle)
        for code in ("xid_79", "nvidia_smi_gpu_lost"):
            found = findings_with(report, code)
            assert found and all(f.get("severity") == "critical" for f in found), (code, found, str(checked))
    finally:
        # The node rebooted with the GPU back: NVML opens it, the new boot's kernel log is empty.
        nvml_device_error(host, 3, None)
        sh(host, "rm -f %s" % KERN_LOG)
    converged = playbook("18c-gpu-back", CONVERGE, limit=host)
    assert converged.ok([host]), converged
    for unit in GPU_SERVICES[host]:
        assert active(host, unit) == "active", (host, unit)
    assert problems(host) == [], host


# --- 19. a node lost in the middle of a rolling upgrade, then the controller killed -------

UPGRADE = os.path.join(os.path.dirname(os.path.dirname(SCENARIO_DIR)), "playbooks", "driver_upgrade.yml")
DRAIN_RECORD = "/var/lib/gpufleet/drained"


def test_19_node_lost_mid_rolling_upgrade_stops_the_run_then_the_next_runs_finish_it():
    # The rolling upgrade to 580 in batches of two, sorted: the HGX and the
    # L40S, then a third node (the L40S's container under a second inventory
    # name: a later batch, which no run may reach). Once the HGX is drained
    # and its driver step starts, its container is killed: from the
    # controller a crashed node and a network partition are both
    # "unreachable", and Ansible takes such a node out of the play without
    # failing it, so the batch ends with the L40S upgraded. The run must stop
    # before the next batch. The HGX, back, stays drained by its record; the
    # next run, killed (SIGKILL of the controller, as a cancelled AWX job)
    # after it stopped the HGX's GPU services, leaves it drained with the
    # change recorded; the run after that finishes the change and undrains it.
    later = L40S + "-again"
    inputs = {"nvidia_driver_branch": "580", "gpufleet_upgrade_serial": "2", "gpufleet_upgrade_order": "sorted"}
    lost = playbook("19a-upgrade-node-lost", UPGRADE, extra=inputs, host_vars={later: {"ansible_host": L40S}},
                    at=(r"^Record the step the node is at \(installing the driver\)$",
                        lambda: subprocess.run(["docker", "kill", HGX], check=True, timeout=60,
                                               stdout=subprocess.DEVNULL)))
    try:
        assert lost.injected and lost.rc != 0, lost
        assert lost.recap.get(HGX, {}).get("unreachable", 0) >= 1, lost
        # The batch's other node finished its upgrade: 580 loaded, undrained.
        assert lost.ran_for(L40S, r"^Record the step the node is at \(done\)$"), lost
        assert (driver_version(L40S), loaded_driver(L40S)) == ("580.95.05", "580.95.05")
        assert sh(L40S, "test -e %s" % DRAIN_RECORD, check=False).returncode != 0
        # The next batch was stopped before it touched a node.
        failed = lost.failed(later)
        assert failed and failed[-1][0].startswith("Stop before this batch when a node of an earlier batch was lost"), \
            (failed, str(lost))
        for words in ('%s stopped answering during "installing the driver"' % HGX, "It stays drained",
                      DRAIN_RECORD, "run this playbook again"):
            assert words in failed[-1][1], (words, failed[-1][1])
        assert not lost.ran_for(later, r"^Read the driver in use and the drain record$"), lost
    finally:
        boot(HGX)
    record = json.loads(out(HGX, "cat %s" % DRAIN_RECORD))
    assert record["reason"].endswith("NVIDIA driver upgrade to branch 580"), record
    assert driver_version(HGX) == "570.195.03"

    killed = playbook("19b-upgrade-controller-killed", UPGRADE, extra=inputs, limit=HGX,
                      kill=(task("Release the holds on the installed driver packages for the driver change"),
                            signal.SIGKILL, 0))
    assert killed.killed, killed
    assert wait_for(lambda: package_manager_idle(HGX), timeout=120)
    assert json.loads(out(HGX, "cat %s" % DRAIN_RECORD))["reason"] == record["reason"]
    change = json.loads(out(HGX, "cat %s" % CHANGE_RECORD))
    assert change["to"].startswith("580."), change

    finished = playbook("19c-upgrade-again", UPGRADE, extra=inputs, limit=HGX)
    assert finished.ok([HGX]), finished
    assert (driver_version(HGX), loaded_driver(HGX)) == ("580.95.05", "580.95.05")
    for path in (DRAIN_RECORD, CHANGE_RECORD):
        assert sh(HGX, "test -e %s" % path, check=False).returncode != 0, path
    for unit in GPU_SERVICES[HGX]:
        assert active(HGX, unit) == "active", (HGX, unit)
    assert set(DRIVER_HELD) <= set(out(HGX, "apt-mark showhold").split())
    assert problems(HGX) == [], HGX
