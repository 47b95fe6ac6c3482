"""gpufleet.nvidia.dcgm on the simulated stack: packages, drop-in, service, sockets, discovery, watches."""
import json
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
from host_checks import listeners  # noqa: E402  pylint: disable=wrong-import-position,import-error

DCGM4 = ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-proprietary")
DROPIN = "/etc/systemd/system/nvidia-dcgm.service.d/10-gpufleet-listener.conf"


def ansible_vars(host):
    return host.ansible.get_variables()


SOCKET = "/run/nvidia-dcgm/nv-hostengine.sock"
SOCKET_GROUP = "nvidia-dcgm-clients"


def port(host):
    return int(ansible_vars(host).get("dcgm_port", 5555))


def socket_path(host):
    """The engine's Unix socket ('' when it listens on TCP), as the role's default or the inventory say."""
    return ansible_vars(host).get("dcgm_unix_socket", SOCKET)


def engine_address(host):
    return ("unix://" + socket_path(host)) if socket_path(host) else "127.0.0.1:%d" % port(host)


def profile(host):
    name = host.file("/etc/nvidia-sim/profile").content_string.strip()
    return json.loads(host.file("/usr/share/nvidia-sim/profiles/%s.json" % name).content_string)


def driver_cuda_major(host):
    header = host.check_output("nvidia-smi")
    return re.search(r"CUDA Version: (\d+)\.", header).group(1)


def dcgmi(host, *args):
    return host.check_output("dcgmi %s --host %s" % (" ".join(args), engine_address(host)))


def test_dcgm4_installed_at_one_version_with_the_drivers_cuda_plugin(host):
    plugin = "datacenter-gpu-manager-4-cuda%s" % driver_cuda_major(host)
    versions = set()
    for name in DCGM4 + (plugin,):
        package = host.package(name)
        assert package.is_installed, name
        versions.add(package.version)
    assert len(versions) == 1, versions
    other = "13" if plugin.endswith("12") else "12"
    assert not host.package("datacenter-gpu-manager-4-cuda%s" % other).is_installed


def test_dcgm3_is_gone(host):
    assert not host.package("datacenter-gpu-manager").is_installed


def test_dropin_replaces_the_packaged_command_line(host):
    dropin = host.file(DROPIN)
    assert dropin.is_file and dropin.user == "root" and dropin.mode == 0o644
    execstart = [line for line in dropin.content_string.splitlines() if line.startswith("ExecStart=")]
    # An empty ExecStart= first clears the packaged one.
    assert execstart[0] == "ExecStart="
    argv = execstart[1][len("ExecStart="):].split()
    assert argv[:2] == ["/usr/bin/nv-hostengine", "-n"]
    if socket_path(host):
        assert argv[argv.index("--domain-socket") + 1] == socket_path(host)
        assert "--port" not in argv and "--bind-interface" not in argv
    else:
        assert argv[argv.index("--bind-interface") + 1] == "127.0.0.1"
        assert argv[argv.index("--port") + 1] == str(port(host))
    assert argv[argv.index("--service-account") + 1] == "nvidia-dcgm"


def test_systemd_runs_the_dropin_command_line(host):
    shown = host.check_output("systemctl show -p ExecStart --value nvidia-dcgm")
    assert ("--domain-socket %s" % socket_path(host)) in shown if socket_path(host) else "--port %d" % port(host) in shown
    assert shown.count("argv[]=") == 1


def test_socket_is_reachable_by_root_and_its_group_only(host):
    if not socket_path(host):
        pytest.skip("this host listens on TCP")
    directory = host.file(os.path.dirname(socket_path(host)))
    assert directory.is_directory
    assert (directory.user, directory.group, directory.mode) == ("root", SOCKET_GROUP, 0o750)
    sock = host.file(socket_path(host))
    assert sock.is_socket
    assert sock.user == "root" and sock.group == SOCKET_GROUP
    assert sock.mode & 0o007 == 0, oct(sock.mode)
    # Another local user cannot reach it; a member of the group can.
    denied = host.run("setpriv --reuid=nobody --regid=nogroup --clear-groups dcgmi discovery -l --host unix://%s"
                      % socket_path(host))
    assert denied.rc != 0, denied.stdout
    assert listeners(host, "nv-hostengine") == set()


def test_service_enabled_and_active(host):
    service = host.service("nvidia-dcgm")
    assert service.is_enabled
    assert service.is_running


def test_hostengine_listens_on_loopback_only(host):
    if socket_path(host):
        pytest.skip("this host listens on its Unix socket")
    assert listeners(host, "nv-hostengine") == {"127.0.0.1:%d" % port(host)}


def test_discovery_lists_every_gpu_and_nvswitch(host):
    expected = profile(host)
    out = dcgmi(host, "discovery", "-l")
    assert re.search(r"^%d GPUs? found\." % len(expected["gpus"]), out, re.M), out
    assert set(re.findall(r"Device UUID: (GPU-[0-9a-f-]+)", out)) == {g["uuid"] for g in expected["gpus"]}
    switches = len(expected.get("nvswitches") or [])
    assert re.search(r"^%d NvSwitch(es)? found\." % switches, out, re.M), out


def test_hgx_has_nvswitches(host):
    if not profile(host).get("nvswitches"):
        pytest.skip("no NVSwitch on this profile")
    out = dcgmi(host, "discovery", "-l")
    assert int(re.search(r"^(\d+) NvSwitch", out, re.M).group(1)) > 0


def test_health_watches_are_set(host):
    letters = ansible_vars(host)["dcgm_health_watches"]
    body = json.loads(dcgmi(host, "health", "-f", "-j"))["body"]
    on = {name for name, entry in body.items() if entry["value"] == "On"}
    named = {"p": {"PCIe"}, "m": {"Memory"}, "i": {"InfoROM"}, "t": {"Thermal", "Power"}, "n": {"NVLINK"}}
    if letters == "a":
        assert set().union(*named.values()) <= on
    else:
        assert on == set().union(*(named[letter] for letter in letters))
