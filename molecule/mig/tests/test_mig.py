"""The mig role on the simulated A100 40GB: MIG mode, layout, boot unit, and a reboot.

The expected layout is read from the inventory (mig_layouts), not from the
files the role wrote. The reboot test comes last: it restarts the container.
"""
import json
import re
import time
import warnings

import pytest

UNIT = "gpufleet-mig-layout.service"
UNIT_PATH = "/etc/systemd/system/" + UNIT
CONFIG = "/etc/gpufleet/mig-layout.json"
SCRIPT_DIR = "/usr/local/lib/gpufleet-mig"
SCRIPT = SCRIPT_DIR + "/gpufleet_mig_layout.py"
MUTATING = ("-cgi", "-dgi", "-dci", "-cci")


def _short(name):
    name = str(name).strip().lower()
    return name[4:].strip() if name.startswith("mig ") else name


def wanted(host):
    """Sorted GPU instance profile names that mig_layouts asks for on GPU 0 (the A100's only GPU)."""
    layouts = host.ansible.get_variables()["mig_layouts"]
    assert len(layouts) == 1
    names = []
    for name, count in layouts[0]["profiles"].items():
        names.extend([_short(name)] * int(count))
    return sorted(names)


def gpu_instances(host):
    listing = host.check_output("nvidia-smi mig -lgi")
    return sorted(line.split()[3] for line in listing.splitlines() if line.startswith("|") and " MIG " in line)


def mig_devices(host):
    listing = host.check_output("nvidia-smi -L")
    return sorted(line.split()[1] for line in listing.splitlines() if line.strip().startswith("MIG "))


def calls(host):
    log = host.file("/var/log/nvidia-sim/calls.log").content_string
    return [json.loads(line) for line in log.splitlines() if line.strip()]


def mutations(host, since=0.0):
    return [c["argv"] for c in calls(host)
            if c["prog"] == "nvidia-smi" and c["ts"] > since and any(f in c["argv"] for f in MUTATING)]


def test_mig_mode_is_in_effect(host):
    out = host.check_output("nvidia-smi --query-gpu=mig.mode.current,mig.mode.pending --format=csv,noheader")
    assert out.strip() == "Enabled, Enabled"


def test_gpu_instances_are_the_wanted_layout(host):
    assert gpu_instances(host) == wanted(host)


def test_each_gpu_instance_has_its_full_compute_instance(host):
    assert mig_devices(host) == wanted(host)
    lci = host.check_output("nvidia-smi mig -lci")
    assert len([line for line in lci.splitlines() if line.startswith("|") and " MIG " in line]) == len(wanted(host))


def test_enable_path_reset_or_reboot(host):
    start = host.ansible.get_variables()["gpufleet_test_mig_start"]
    resets = [c["argv"] for c in calls(host) if c["argv"][-1:] == ["-r"]]
    started = host.file("/var/lib/gpufleet-test/mig-start-state").mtime.timestamp()
    booted = float(host.file("/run/nvidia-sim/booted").content_string.strip())
    if start == "pending_idle":
        # Idle GPU: reset by the role, no reboot since the starting state.
        assert resets == [["-i", "0", "-r"]]
        assert booted < started
    else:
        # The job held the GPU: no reset attempted, the role rebooted.
        assert resets == []
        assert booted > started
        assert not host.file("/run/nvidia-sim/processes").exists or \
            host.file("/run/nvidia-sim/processes").listdir() == []


def test_layout_file_is_the_inventory_layout(host):
    config = host.file(CONFIG)
    assert config.user == "root" and config.group == "root" and config.mode == 0o644
    data = json.loads(config.content_string)
    layouts = host.ansible.get_variables()["mig_layouts"]
    assert data["version"] == 1
    assert data["layouts"] == [
        {"gpus": [str(g) for g in layouts[0]["gpus"]],
         "profiles": dict((_short(n), int(c)) for n, c in layouts[0]["profiles"].items())}
    ]


def test_boot_script_and_its_parsers_are_installed(host):
    script = host.file(SCRIPT)
    assert script.mode == 0o644 and script.user == "root"
    library = host.file(SCRIPT_DIR + "/nvidia_mig.py")
    assert library.mode == 0o644 and library.user == "root"
    assert "def layout_matches" in library.content_string
    record = host.file(SCRIPT_DIR + "/gpu_record.py")
    assert record.mode == 0o644 and record.user == "root"
    assert "def parse_query_csv" in record.content_string


def test_boot_unit_is_ordered_and_enabled(host):
    unit = host.file(UNIT_PATH)
    assert unit.mode == 0o644
    text = unit.content_string
    assert "\nType=oneshot\n" in text and "\nRemainAfterExit=yes\n" in text
    assert ("\nExecStart=/usr/bin/python3 %s --config %s --wait-driver 120 --timeout 60\n" % (SCRIPT, CONFIG)) in text
    assert "\nBefore=nvidia-dcgm.service nvidia-dcgm-exporter.service docker.service containerd.service " \
           "kubelet.service nvidia-cdi-refresh.service\n" in text
    after = [line for line in text.splitlines() if line.startswith("After=")][0].split("=", 1)[1].split()
    assert after[:3] == ["systemd-modules-load.service", "nvidia-persistenced.service",
                         "nvidia-fabricmanager.service"]
    assert host.check_output("systemctl is-enabled %s" % UNIT) == "enabled"
    # systemd has read the unit as written (daemon-reload ran).
    assert host.check_output("systemctl show -p NeedDaemonReload --value %s" % UNIT) == "no"
    before = host.check_output("systemctl show -p Before --value %s" % UNIT).split()
    assert "docker.service" in before and "kubelet.service" in before


def test_boot_unit_is_sandboxed(host):
    # docs/security.md records the levels: 9.4 without the role's hardening.
    shown = host.check_output("systemd-analyze security --no-pager %s" % UNIT)
    level = float(re.search(r"Overall exposure level for %s: ([0-9.]+)" % re.escape(UNIT), shown).group(1))
    # Shown in pytest's warnings summary, for docs/security.md.
    warnings.warn("systemd-analyze security %s on %s: %.1f" % (UNIT, host.backend.host, level))
    assert level <= 3.0, shown


def test_boot_script_changes_nothing_when_the_layout_matches(host):
    since = time.time() - 1
    result = host.run("python3 %s --config %s", SCRIPT, CONFIG)
    assert result.rc == 0, result.stdout + result.stderr
    assert "already has its MIG layout" in result.stdout
    assert mutations(host, since) == []
    assert host.run("python3 %s --check --config %s", SCRIPT, CONFIG).rc == 0


def _pid1_start(host):
    try:
        result = host.run("cut -d' ' -f22 /proc/1/stat")
    except Exception:  # the container is restarting
        return None
    return result.stdout.strip() if result.rc == 0 and result.stdout.strip() else None


@pytest.fixture(scope="module")
def rebooted(request):
    """Reboot each host once (container restart), wait for systemd, return the time of the reboot."""
    done = {}

    def reboot(host):
        name = host.backend.get_hostname()
        if name in done:
            return done[name]
        before = _pid1_start(host)
        assert before
        reboot_time = float(host.check_output("date +%s.%N"))
        host.run("systemctl reboot")
        deadline = time.time() + 300
        while time.time() < deadline:
            time.sleep(3)
            now = _pid1_start(host)
            if now and now != before:
                break
        else:
            pytest.fail("%s did not come back from the reboot" % name)
        state = host.run("systemctl is-system-running --wait")
        assert state.stdout.strip() in ("running", "degraded"), host.run("systemctl --failed").stdout
        done[name] = reboot_time
        return reboot_time

    return reboot


def test_after_a_reboot_the_unit_recreates_the_layout(host, rebooted):
    reboot_time = rebooted(host)
    show = host.check_output("systemctl show -p ActiveState -p Result %s" % UNIT)
    assert "ActiveState=active" in show and "Result=success" in show
    # The simulator dropped the instances at boot; the unit created them again.
    created = mutations(host, reboot_time)
    assert len([argv for argv in created if "-cgi" in argv]) == 1, created
    assert gpu_instances(host) == wanted(host)
    assert mig_devices(host) == wanted(host)
    journal = host.check_output("journalctl -b -u %s --no-pager" % UNIT)
    assert "created" in journal


def test_after_a_reboot_the_unit_ran_before_the_gpu_users_would(host, rebooted):
    rebooted(host)
    # The unit finished before multi-user.target, which pulls in docker, kubelet and DCGM.
    unit_done = int(host.check_output("systemctl show -p ExecMainExitTimestampMonotonic --value %s" % UNIT))
    target = int(host.check_output("systemctl show -p ActiveEnterTimestampMonotonic --value multi-user.target"))
    assert 0 < unit_done <= target
