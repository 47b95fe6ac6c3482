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
  3. the NVIDIA repository unreachable, serving a bad signature, and a key
     whose fingerprint is not the pinned one: the role stops at the
     repository with a message saying which, nothing changed, apt works;
  4. nvidia-smi and dcgmi wedged: every role that asks them, and the health
     playbook, stop with a timeout instead of hanging the play;
  5. a broken package in the repository in the middle of a driver upgrade:
     the node is put back (services, holds, pin) and told so, dpkg is clean;
  6. the dpkg lock held by another process: the upgrade waits and succeeds;
  7. the driver/library mismatch this leaves, and a driver that is not
     loaded: facts fail with the reason, site.yml skips what needs the
     driver (reboot policy never), then reboots and converges (if_needed);
  8. a mirror that gains a release after the converge: following the
     security floor refreshes the package lists that lack it and installs it.
"""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults import (  # noqa: E402  pylint: disable=wrong-import-position,import-error
    CONVERGE, HGX, HOSTS, L40S, ROLE, SCENARIO_DIR, WORK, Mirror, active, main_pid, out, playbook, problems, put, sh,
    snapshot, wait_for)

REPO_DIR = os.environ.get("GPUFLEET_TEST_REPO_DIR", "/var/tmp/gpufleet-harness/repo")
DISTRO = {HGX: "debian12", L40S: "debian13"}
DCGM_PORT = {HGX: 5630, L40S: 5631}
EXPORTER_PORT = {HGX: 9440, L40S: 9441}
GPU_SERVICES = {HGX: ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "nvidia-dcgm-exporter"),
                L40S: ("nvidia-persistenced", "nvidia-dcgm", "nvidia-dcgm-exporter")}
INITRAMFS_LOG = "/var/log/gpufleet-test/update-initramfs.log"
MODPROBE_FILES = ("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf",)
# What molecule/nvidia_driver/files/daemon.json (put in place by prepare.yml) holds.
DOCKER_BEFORE = {"data-root": "/srv/docker", "live-restore": True, "log-driver": "json-file",
                 "log-opts": {"max-file": "3", "max-size": "100m"}, "registry-mirrors": ["https://mirror.gcr.io"]}
DRIVER_HELD = ("nvidia-driver", "nvidia-open", "nvidia-kernel-open-dkms", "libcuda1", "nvidia-smi")
UNREACHABLE = "http://127.0.0.1:1"
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
        assert "127.0.0.1:8765" in policy and "Candidate: 570." in policy, (host, policy)


def test_3_repository_faults_stop_at_the_repository_and_change_nothing():
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
