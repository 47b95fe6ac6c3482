"""The persistence_mode role's end state on the converged hosts."""
import csv
import io

import pytest

SERVICE = "nvidia-persistenced.service"
DROPIN = "/etc/systemd/system/nvidia-persistenced.service.d/gpufleet-persistence-mode.conf"


@pytest.fixture(scope="module")
def hardened(host):
    return bool(host.ansible.get_variables().get("nvidia_driver_device_file_hardening", False))


def test_daemon_runs_with_persistence_mode_on(host, hardened):
    service = host.service("nvidia-persistenced")
    assert service.is_running
    dropin = host.file(DROPIN).content_string
    assert "ExecStart=\n" in dropin
    assert "StopWhenUnneeded=false" in dropin
    exec_start = host.check_output("systemctl show -p ExecStart --value %s", SERVICE)
    assert "--persistence-mode" in exec_start and "--no-persistence-mode" not in exec_start
    assert "--user nvidia-persistenced" in exec_start
    assert ("--group nvidia" in exec_start) == hardened


def test_daemon_starts_at_boot(host):
    # The packaged unit is static: multi-user.target must want it.
    assert host.file("/etc/systemd/system/multi-user.target.wants/%s" % SERVICE).is_symlink
    wanted_by = host.check_output("systemctl show -p WantedBy --value %s", SERVICE).split()
    assert "multi-user.target" in wanted_by
    assert host.check_output("systemctl show -p StopWhenUnneeded --value %s", SERVICE) == "no"
    # The packaged unit has no Restart=; a daemon that dies is started again
    # (killed for real in the fault suite, molecule/faults).
    assert host.check_output("systemctl show -p Restart --value %s", SERVICE) == "on-failure"


def test_daemon_dropped_privileges(host):
    pid = host.check_output("systemctl show -p MainPID --value %s", SERVICE)
    assert pid != "0"
    assert host.check_output("ps -o user= -p %s", pid) == "nvidia-persistenced"
    account = host.user("nvidia-persistenced")
    assert account.shell == "/usr/sbin/nologin"


def test_every_gpu_reports_persistence_enabled(host):
    out = host.check_output("nvidia-smi --query-gpu=index,persistence_mode --format=csv,noheader")
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    assert rows and {row[1] for row in rows} == {"Enabled"}


def test_no_legacy_fallback_where_the_daemon_exists(host):
    assert not host.file("/etc/systemd/system/gpufleet-nvidia-persistence-mode.service").exists
