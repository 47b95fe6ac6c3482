"""Fleet operations through ansible-runner, as AWX runs them (tests/fleet.py).

In order, on the fleet converged at branch 570:
  1. health.yml: the report is written and every node is healthy; the
     acceptance tests nvbandwidth and all_reduce_perf, turned on by survey
     strings, say they did not run (info findings), since no node has them;
  2. the health brake on ten inventory hosts (the three nodes and seven more
     names for the HGX's container, with a kernel log of their own): Xid 79 on
     the HGX, Xid 48 on the L40S, which someone else drained in Slurm before,
     and Xid 63 on the A100. health.yml with draining on and the default 10 %
     brake drains the HGX only (the costliest need), reports the A100 as left
     alone by the brake and the L40S as drained by someone else, whose Slurm
     reason stays; a second run raises none of the Xids again (they are
     remembered on the nodes) and drains nothing;
  3. driver_upgrade.yml to 580 in batches of one, by name (A100, HGX, L40S),
     the HGX failing its verification (a GPU fallen off the bus at every
     boot): the A100 is drained, upgraded, rebooted (its MIG layout back),
     verified and resumed; the HGX is upgraded with Fabric Manager at the same
     version, rebooted and stays drained with the reason; the run stops
     before the L40S;
  4. again, with the HGX repaired and the L40S's package step failing (dpkg
     refuses to run): the A100 is left alone, the HGX is verified and
     resumed, the L40S is put back on 570 (pin, holds, services) and stays
     drained;
  5. site.yml at 580 on the live fleet: the L40S gets 580 installed and,
     until its reboot, the container toolkit and DCGM skip it;
  6. the upgrade again: the L40S is rebooted, verified and resumed;
  7. site.yml at 580 changes nothing;
  8. the node-local health check (health_node_local) on the A100: installed by
     the health role, run by hand without Ansible, then as the real slurmd's
     HealthCheckProgram, which drains the node itself on an Xid 79.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
import gpu_faults  # noqa: E402  pylint: disable=wrong-import-position,import-error
from fleet import (  # noqa: E402  pylint: disable=wrong-import-position,import-error
    CONTROLLER, GPU_NODES, driver, out, package_version, put, record, restarts, run, sh, slurm_node)

# The headless Chromium check of the unit tests, here on the fleet's own report.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".collections"))
from ansible_collections.gpufleet.nvidia.tests.unit.integration.test_health_report_chromium import (  # noqa: E402
    CHROMIUM, FLAGS, check_dom, page_requests)  # pylint: disable=wrong-import-position,import-error

INVENTORY = os.path.dirname(os.environ.get("MOLECULE_INVENTORY_FILE", "/nonexistent/x"))
WORK = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp/gpufleet-fleet"), "runner")
KERN_LOG = "/run/gpufleet-test/kern.log"
# The survey of the "Rolling driver upgrade" job template (playbooks/vars/awx_configure.yml): strings.
# The batches go by name (order: sorted): the A100, the HGX, the L40S.
UPGRADE = {"nvidia_driver_branch": "580", "gpufleet_upgrade_serial": "1", "gpufleet_upgrade_drain": "slurm",
           "gpufleet_upgrade_order": "sorted"}
XID_UNIT = "/etc/systemd/system/gpufleet-test-xid.service"
XID_AT_BOOT = "/etc/gpufleet-test-xid-at-boot"
DPKG_FAILS = "/etc/apt/apt.conf.d/00gpufleet-test-dpkg-fails"


def job(name, playbook, extravars=None):
    return run(os.path.join(WORK, name), INVENTORY, playbook, name, extravars)


def bus_id(node, index=0):
    return out(node, "nvidia-smi -i %d --query-gpu=pci.bus_id --format=csv,noheader" % index)


def xid79(node, index=0):
    """Xid 79 on a GPU, as the driver logs it."""
    return gpu_faults.xid79(bus_id(node, index))


def health_report(directory):
    with open(os.path.join(directory, "gpu-health.json")) as handle:
        return json.load(handle)


def report_hosts(report):
    """{host: healthy} from gpu-health.json, whatever its exact layout."""
    hosts = report.get("hosts", report)
    if isinstance(hosts, list):
        return dict((h["host"], h["healthy"]) for h in hosts)
    return dict((name, value["healthy"]) for name, value in hosts.items())


def chromium(page):
    """The page's DOM after its script ran, and what Chromium requested for it (its net log)."""
    assert CHROMIUM, "chromium is not installed (make setup installs it)"
    work = os.path.join(WORK, "chromium")
    os.makedirs(work, exist_ok=True)
    net_log = os.path.join(work, "net.json")
    done = subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=%s" % os.path.join(work, "profile"),
                                                "--log-net-log=%s" % net_log, "--dump-dom", "file://%s" % page],
                          capture_output=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    return done.stdout.decode("utf-8"), page_requests(pathlib.Path(net_log))


@pytest.fixture(scope="module")
def before():
    return dict((node, restarts(node)) for node in GPU_NODES)


def test_1_health_report_all_healthy():
    report_dir = os.path.join(WORK, "report-1")
    # The acceptance tests turned on as an AWX survey would (strings). The simulated nodes have no nvbandwidth
    # and no all_reduce_perf: each says it did not run, as information; none passes, none fails the node.
    result = job("health-1", "playbooks/health.yml", {"health_report_dir": report_dir,
                                                      "health_check_nvbandwidth": "true",
                                                      "health_check_nccl_allreduce": "yes"})
    assert result.status == "successful" and result.rc == 0, result.summary()
    assert result.failed() == [], result.summary()
    assert all(result.changed(node) == 0 for node in GPU_NODES), result.stats
    assert os.path.isfile(os.path.join(report_dir, "gpu-health.html"))
    report = health_report(report_dir)
    assert report_hosts(report) == dict((node, True) for node in GPU_NODES)
    for host in report["hosts"]:
        not_run = dict((f["check"], f) for f in host["findings"] if f["code"] == "acceptance_not_run")
        assert sorted(not_run) == ["nccl_allreduce", "nvbandwidth"], host["findings"]
        assert all((f["severity"], f["action"], f["source"]) == ("info", "none", "gpufleet") for f in not_run.values())
        assert "is not installed" in not_run["nvbandwidth"]["evidence"], not_run
        checks = dict((c["name"], c["status"]) for c in host["checks"])
        assert checks["nvbandwidth"] == checks["nccl_allreduce"] == "skipped", checks
    gpus = dict((host["host"], len(host["gpus"])) for host in report["hosts"])
    assert gpus == {"fleet-hgx": 8, "fleet-l40s": 2, "fleet-a100": 1}, gpus
    # The page in headless Chromium: every host and GPU shown, nothing loaded from anywhere.
    dom, requests = chromium(os.path.join(report_dir, "gpu-health.html"))
    assert requests == [], requests
    check_dom(dom, report)
    assert dom.count('data-act="none" class="f-info"') >= 2 * len(GPU_NODES) and "acceptance_not_run" in dom
    # The job's artifacts: event stream, stdout, status, rc.
    assert os.path.isdir(os.path.join(result.dir, "job_events")) and result.stdout


# Seven more inventory names for the HGX's container: a fleet of ten for the
# drain brake. Each has a kernel log and a health memory of its own, and is
# healthy; the HGX's GPUs, DCGM engine and expectations are the HGX's.
ALIAS_LOG = "/run/gpufleet-test/kern-alias.log"
ALIASES = dict(("fleet-hgx-name%d" % n, {
    "ansible_host": "fleet-hgx", "ansible_connection": "gpufleet_nsenter", "nvidia_driver_expected_gpu_count": 8,
    "dcgm_port": 5610,
    "health_kernel_log_path": ALIAS_LOG, "health_state_path": "/var/lib/gpufleet/health-state-name%d.json" % n})
    for n in range(2, 9))
FOREIGN_REASON = "fan replacement, ticket 4711"


def fleet_of_ten(name, playbook, extravars):
    """The job on the three nodes and the HGX's seven other names (an inventory file beside Molecule's)."""
    inventory = os.path.join(WORK, "inventory-" + name)
    if os.path.exists(inventory):
        shutil.rmtree(inventory)
    shutil.copytree(INVENTORY, inventory)
    with open(os.path.join(inventory, "zz-aliases.json"), "w") as handle:
        json.dump({"gpu_nodes": {"hosts": ALIASES}}, handle, indent=1)
    return run(os.path.join(WORK, name), inventory, playbook, name, extravars)


def test_2_drain_brake_foreign_drains_and_xids_reported_once():
    put("fleet-hgx", ALIAS_LOG, "")
    put("fleet-hgx", KERN_LOG, xid79("fleet-hgx", 3), append=True)
    put("fleet-l40s", KERN_LOG, gpu_faults.xid(bus_id("fleet-l40s", 1), 48, "An uncorrectable double bit error (DBE) "
                                               "has been detected on GPU in the framebuffer at partition 1, subpartition "
                                               "0."), append=True)
    put("fleet-a100", KERN_LOG, gpu_faults.xid(bus_id("fleet-a100", 0), 63, "Row Remapper: New row marked for "
                                               "remapping, reset gpu to activate."), append=True)
    sh(CONTROLLER, "scontrol update NodeName=fleet-l40s State=DRAIN Reason='%s'" % FOREIGN_REASON)
    drain = {"health_drain_unhealthy": True, "health_drain_hook": "slurm"}
    report_dir = os.path.join(WORK, "report-2")
    result = fleet_of_ten("health-2", "playbooks/health.yml", dict(drain, health_report_dir=report_dir))
    assert result.status == "successful", result.summary()
    assert result.failed() == [], result.summary()
    report = health_report(report_dir)
    healthy = report_hosts(report)
    assert len(healthy) == 10 and sorted(n for n in healthy if not healthy[n]) == sorted(GPU_NODES), healthy
    codes = dict((h["host"], sorted(f["code"] for f in h["findings"])) for h in report["hosts"])
    assert codes["fleet-hgx"] == ["xid_79"] and codes["fleet-l40s"] == ["xid_48"] and codes["fleet-a100"] == ["xid_63"]
    actions = dict((h["host"], [f["action"] for f in h["findings"]]) for h in report["hosts"] if h["findings"])
    assert actions == {"fleet-hgx": ["reboot"], "fleet-l40s": ["reset"], "fleet-a100": ["reset"]}, actions
    # 10 % of ten hosts: one drain, the costliest need (Xid 79: reboot); the others named with why.
    hgx = slurm_node("fleet-hgx")
    assert "DRAIN" in hgx["state"] and re.search(r"gpu health.*xid_79", hgx["reason"], re.I), hgx["text"]
    assert record("fleet-hgx")["reason"] == hgx["reason"]
    assert "DRAIN" not in slurm_node("fleet-a100")["state"] and record("fleet-a100") is None
    l40s = slurm_node("fleet-l40s")
    assert "DRAIN" in l40s["state"] and l40s["reason"] == FOREIGN_REASON and record("fleet-l40s") is None, l40s
    stdout = result.stdout
    assert ("Drain brake: 1 of 10 hosts (health_drain_max_share 10%) may be drained in one run; drained now: "
            "fleet-hgx.") in stdout
    assert "fleet-a100: unhealthy (needs reset), left in service by the brake" in stdout
    assert "fleet-l40s: already drained by someone else (%s)" % FOREIGN_REASON in stdout
    # Only the drained node changed.
    assert result.changed("fleet-hgx") > 0 and result.changed("fleet-l40s") == result.changed("fleet-a100") == 0

    # The next run: every Xid was reported on its node's memory, none is raised again, nothing is drained.
    again = fleet_of_ten("health-2b", "playbooks/health.yml",
                         dict(drain, health_report_dir=os.path.join(WORK, "report-2b")))
    assert again.status == "successful" and again.failed() == [], again.summary()
    report = health_report(os.path.join(WORK, "report-2b"))
    assert all(report_hosts(report).values()), report_hosts(report)
    already = dict((h["host"], [f["code"] for f in h["already_reported"]]) for h in report["hosts"]
                   if h["already_reported"])
    assert already == {"fleet-hgx": ["xid_79"], "fleet-l40s": ["xid_48"], "fleet-a100": ["xid_63"]}, already
    assert all(again.changed(node) == 0 for node in GPU_NODES), again.stats
    assert "DRAIN" not in slurm_node("fleet-a100")["state"] and slurm_node("fleet-l40s")["reason"] == FOREIGN_REASON
    assert "DRAIN" in slurm_node("fleet-hgx")["state"]

    # Someone else resumes the L40S; the L40S's and A100's Xids leave the kernel log (the HGX keeps its own and
    # stays drained for the upgrade of test 3).
    sh(CONTROLLER, "scontrol update NodeName=fleet-l40s State=RESUME")
    for node in ("fleet-l40s", "fleet-a100"):
        sh(node, "sed -i '/NVRM: Xid/d' %s" % KERN_LOG)


def _boot_xid(node, gpu):
    """A GPU of the node falls off the bus at every boot (an Xid 79 in the new boot's kernel log)."""
    put(node, XID_AT_BOOT, xid79(node, gpu))
    put(node, XID_UNIT, "[Unit]\nDescription=Test harness: a GPU fallen off the bus at boot\n"
                        "After=systemd-tmpfiles-setup.service\n[Service]\nType=oneshot\n"
                        "ExecStart=/bin/sh -c 'cat %s >> %s'\n[Install]\nWantedBy=multi-user.target\n"
        % (XID_AT_BOOT, KERN_LOG))
    sh(node, "systemctl daemon-reload && systemctl enable gpufleet-test-xid.service")


def test_3_rolling_upgrade_stops_at_a_node_failing_verification(before):
    _boot_xid("fleet-hgx", 5)
    result = job("upgrade-1", "playbooks/driver_upgrade.yml", UPGRADE)
    assert result.status == "failed", result.summary()

    # A100: drained, upgraded, rebooted, verified, resumed; its MIG layout came back with the reboot.
    assert driver("fleet-a100").startswith("580.") and restarts("fleet-a100") == before["fleet-a100"] + 1
    a100 = slurm_node("fleet-a100")
    assert a100["state"] == "IDLE" and record("fleet-a100") is None, a100["text"]
    assert len(re.findall(r"MIG 3g\.20gb", out("fleet-a100", "nvidia-smi -L"))) == 2

    # HGX: upgraded with Fabric Manager at exactly the driver's version, rebooted, failed its
    # verification: stays drained with the reason, in Slurm and on the node.
    assert driver("fleet-hgx").startswith("580.") and restarts("fleet-hgx") == before["fleet-hgx"] + 1
    fm = package_version("fleet-hgx", "nvidia-fabricmanager").split("-")[0]
    assert fm == driver("fleet-hgx")
    assert out("fleet-hgx", "systemctl is-active nvidia-fabricmanager").strip() == "active"
    # The reason first: where the run stopped explains every later difference.
    hgx = slurm_node("fleet-hgx")
    assert "DRAIN" in hgx["state"] and "verification failed" in hgx["reason"], (hgx["text"], result.summary())
    # DCGM's CUDA plugin followed the driver's CUDA major (12 -> 13).
    assert package_version("fleet-hgx", "datacenter-gpu-manager-4-cuda13")
    assert "xid_79" in hgx["reason"] or "xid" in hgx["reason"].lower(), hgx["text"]
    assert record("fleet-hgx")["reason"] == hgx["reason"]
    assert [host for host, _task, _msg in result.failed()][-1] == "fleet-hgx"

    # The run stopped before the next batch: the L40S was not touched (its
    # inputs were checked on the controller by the first play, as every node's).
    assert "fleet-l40s" in result.hosts(play="Check the upgrade's inputs before any node is touched")
    assert "fleet-l40s" not in result.hosts(play="Rolling NVIDIA driver upgrade")
    assert driver("fleet-l40s").startswith("570.") and restarts("fleet-l40s") == before["fleet-l40s"]
    assert slurm_node("fleet-l40s")["state"] == "IDLE"

    # One node at a time: the A100 was back in service before the HGX was drained.
    a100_undrained = result.task_events("fleet-a100", r"Put the node back into service", "runner_on_ok")
    hgx_drained = result.task_events("fleet-hgx", r"Drain the node through the hook", "runner_on_ok")
    assert a100_undrained and hgx_drained and max(a100_undrained) < min(hgx_drained)
    reboots = [e["event_data"]["host"] for e in result.events
               if e["event"] == "runner_on_ok" and "Reboot to load the new driver" in e["event_data"].get("task", "")]
    assert reboots == ["fleet-a100", "fleet-hgx"]


def test_4_failed_package_step_puts_the_node_back(before):
    # Repair the HGX (the operator's fix), and make dpkg refuse to run on the L40S.
    sh("fleet-hgx", "systemctl disable gpufleet-test-xid.service && rm -f %s && : > %s" % (XID_UNIT, KERN_LOG))
    put("fleet-l40s", DPKG_FAILS, 'DPkg::Pre-Invoke { "/bin/false"; };\n')
    held_before = out("fleet-l40s", "apt-mark showhold").split()
    result = job("upgrade-2", "playbooks/driver_upgrade.yml", UPGRADE)
    assert result.status == "failed", result.summary()

    # A100: already at 580 and not drained: nothing done.
    assert result.changed("fleet-a100") == 0 and not result.task_events("fleet-a100", r"Drain the node through")
    # HGX: verified again and resumed (the reboot it needed already happened).
    assert slurm_node("fleet-hgx")["state"] == "IDLE" and record("fleet-hgx") is None
    assert restarts("fleet-hgx") == before["fleet-hgx"] + 1

    # L40S: the failed package step put it back and said so; it stays drained.
    messages = [msg for host, task, msg in result.failed() if host == "fleet-l40s" and task == "Say what state the node is in"]
    assert messages, result.summary()
    assert "The node was put back" in messages[0] and "State now: driver packages at 570." in messages[0], messages[0]
    assert "The GPUs keep working on the driver they had." in messages[0], messages[0]
    assert driver("fleet-l40s").startswith("570.") and restarts("fleet-l40s") == before["fleet-l40s"]
    assert "Pin: version 570." in out("fleet-l40s", "cat /etc/apt/preferences.d/gpufleet-nvidia-driver.pref")
    assert sorted(out("fleet-l40s", "apt-mark showhold").split()) == sorted(held_before)
    for service in ("nvidia-persistenced", "nvidia-dcgm"):
        assert out("fleet-l40s", "systemctl is-active %s" % service).strip() == "active", service
    l40s = slurm_node("fleet-l40s")
    assert "DRAIN" in l40s["state"] and "failed" in l40s["reason"], l40s["text"]
    assert record("fleet-l40s")["reason"] == l40s["reason"]


def test_5_site_on_a_node_waiting_for_its_reboot():
    # site.yml at 580 on the live fleet: the L40S (still 570, drained) gets the new driver installed, and
    # what needs the loaded driver (CDI, DCGM) waits for its reboot instead of failing.
    sh("fleet-l40s", "rm -f %s" % DPKG_FAILS)
    result = job("site-1", "playbooks/site.yml", {"nvidia_driver_branch": "580"})
    assert result.status == "successful", result.summary()
    assert result.failed() == [], result.summary()
    assert result.changed("fleet-a100") == 0 and result.changed("fleet-hgx") == 0, result.stats
    assert "fleet-l40s waits for a reboot" in result.stdout
    skipped = [e["event_data"]["task"] for e in result.events if e["event"] == "runner_on_skipped"
               and e["event_data"].get("host") == "fleet-l40s"]
    for task in ("NVIDIA Container Toolkit", "DCGM host engine"):
        assert task in skipped, (task, skipped)
    assert "Driver/library version mismatch" in sh("fleet-l40s", "nvidia-smi", check=False).stdout


def test_6_rolling_upgrade_completes(before):
    # The L40S has 580 installed, not loaded: nvidia-smi cannot list its processes; Slurm says it runs no job.
    result = job("upgrade-3", "playbooks/driver_upgrade.yml", dict(UPGRADE, gpufleet_upgrade_wait_unknown="proceed"))
    assert result.status == "successful", result.summary()
    assert result.failed() == [], result.summary()
    assert result.changed("fleet-a100") == 0 and result.changed("fleet-hgx") == 0 and result.changed("fleet-l40s") > 0
    for node in GPU_NODES:
        assert driver(node).startswith("580."), node
        assert slurm_node(node)["state"] == "IDLE", slurm_node(node)["text"]
        assert record(node) is None
    assert restarts("fleet-l40s") == before["fleet-l40s"] + 1


def test_7_site_changes_nothing_after_the_upgrade():
    result = job("site-2", "playbooks/site.yml", {"nvidia_driver_branch": "580"})
    assert result.status == "successful", result.summary()
    assert result.failed() == [], result.summary()
    assert dict((node, result.changed(node)) for node in GPU_NODES) == dict((node, 0) for node in GPU_NODES), \
        result.summary()


def test_8_node_local_health_check_drains_through_the_real_slurmd():
    # The health role installs the catalog on the A100 node (health_node_local), with the settings of its inputs.
    local = job("health-node-local", "playbooks/health.yml",
                {"health_node_local": True, "health_report_dir": os.path.join(WORK, "report-8")})
    assert local.status == "successful" and local.failed() == [], local.summary()
    assert local.changed("fleet-a100") > 0
    assert out("fleet-a100", "systemctl is-enabled gpufleet-health.timer").strip() == "enabled"
    # Run by hand, without Ansible: healthy, the series written for node_exporter.
    done = sh("fleet-a100", "/usr/local/sbin/gpufleet-health --textfile /var/lib/prometheus/node-exporter")
    assert "gpufleet-health: healthy, 0 finding(s)" in done.stdout, done.stdout
    assert "gpufleet_health_healthy 1" in out("fleet-a100", "cat /var/lib/prometheus/node-exporter/gpufleet_health.prom")
    # And by systemd, as the timer starts it: the unit's sandbox lets it read the GPUs and write its two folders.
    sh("fleet-a100", "rm /var/lib/prometheus/node-exporter/gpufleet_health.prom && systemctl start gpufleet-health.service")
    assert out("fleet-a100", "systemctl show -p Result --value gpufleet-health.service").strip() == "success"
    assert "gpufleet_health_healthy 1" in out("fleet-a100", "cat /var/lib/prometheus/node-exporter/gpufleet_health.prom")
    again = job("health-node-local-again", "playbooks/health.yml",
                {"health_node_local": True, "health_report_dir": os.path.join(WORK, "report-8b")})
    assert all(again.changed(node) == 0 for node in GPU_NODES), again.stats

    # Slurm's own health check: slurmd runs HealthCheckProgram when it starts, before it registers. A GPU fell off
    # the bus; the node drains itself with the finding as its reason.
    put("fleet-a100", KERN_LOG, xid79("fleet-a100", 0), append=True)
    conf = "/etc/slurm/slurm.conf"
    sh("fleet-a100", "cp %s %s.before-health && printf 'HealthCheckProgram=/usr/local/sbin/gpufleet-health\\n"
                     "HealthCheckInterval=3600\\n' >> %s && systemctl restart slurmd" % (conf, conf, conf))
    try:
        node = slurm_node("fleet-a100")
        for _second in range(60):
            if "DRAIN" in node["state"]:
                break
            time.sleep(1)
            node = slurm_node("fleet-a100")
        assert "DRAIN" in node["state"] and node["reason"].startswith("gpu health: xid_79"), node["text"]
        # Only slurmd runs it with --slurm (its default without arguments): the timer writes metrics only.
        # The next health check (the same Xid, remembered) leaves the drain as it is: the node is resumed by people.
        done = sh("fleet-a100", "/usr/local/sbin/gpufleet-health", check=False)
        assert done.returncode == 0 and "already reported: xid_79" in done.stdout, done.stdout
        assert "DRAIN" in slurm_node("fleet-a100")["state"]
    finally:
        sh("fleet-a100", "mv %s.before-health %s && sed -i '/NVRM: Xid/d' %s && systemctl restart slurmd"
           % (conf, conf, KERN_LOG))
        sh(CONTROLLER, "scontrol update NodeName=fleet-a100 State=RESUME")
