"""gpufleet.nvidia.dcgm_exporter on the simulated stack: files, service, sockets and /metrics content."""
import csv
import io
import json
import os
import re
import sys
import warnings

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
from host_checks import listeners  # noqa: E402  pylint: disable=wrong-import-position,import-error

DROPIN = "/etc/systemd/system/nvidia-dcgm-exporter.service.d/10-gpufleet.conf"
COUNTERS = "/etc/dcgm-exporter/gpufleet-counters.csv"
WEB_CONFIG = "/etc/dcgm-exporter/gpufleet-web-config.yml"
EXTRA = "DCGM_FI_DEV_POWER_MGMT_LIMIT"

# Scrapes from inside the container (no curl there): prints status and body as JSON.
SCRAPE = r"""
import base64, json, ssl, sys, urllib.error, urllib.request
url, user, password, cafile = sys.argv[1:5]
request = urllib.request.Request(url)
if user:
    request.add_header("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode())
context = ssl.create_default_context(cafile=cafile) if cafile else None
try:
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:
        print(json.dumps({"status": answer.status, "body": answer.read().decode()}))
except urllib.error.HTTPError as error:
    print(json.dumps({"status": error.code, "body": ""}))
"""


def ansible_vars(host):
    return host.ansible.get_variables()


def exporter_port(host):
    return int(ansible_vars(host).get("dcgm_exporter_port", 9400))


def dcgm_port(host):
    return int(ansible_vars(host).get("dcgm_port", 5555))


SOCKET = "/run/nvidia-dcgm/nv-hostengine.sock"
USER = "nvidia-dcgm-exporter"
RUNTIME = "/run/nvidia-dcgm-exporter"


def engine(host):
    """Where the exporter reads the host engine: the dcgm role's socket, or its TCP port when the socket is off."""
    socket_path = ansible_vars(host).get("dcgm_unix_socket", SOCKET)
    return ("unix://" + socket_path) if socket_path else "127.0.0.1:%d" % dcgm_port(host)


def web_config(host):
    return ansible_vars(host).get("dcgm_exporter_web_config") or {}


def scrape(host, with_credentials=True):
    variables = ansible_vars(host)
    tls = "tls_server_config" in web_config(host)
    url = "%s://127.0.0.1:%d/metrics" % ("https" if tls else "http", exporter_port(host))
    user = variables.get("dcgm_exporter_verify_username", "") if with_credentials else ""
    password = variables.get("dcgm_exporter_verify_password", "") if with_credentials else ""
    cafile = variables.get("dcgm_exporter_verify_ca_path", "") if tls else ""
    result = host.run("python3 -c %s %s %s %s %s" % tuple(
        "'%s'" % arg.replace("'", "'\\''") for arg in (SCRAPE, url, user, password, cafile)))
    assert result.rc == 0, result.stderr
    return json.loads(result.stdout)


def gpus(host):
    out = host.check_output("nvidia-smi --query-gpu=index,uuid --format=csv,noheader")
    return {row[0].strip(): row[1].strip() for row in csv.reader(io.StringIO(out))}


def test_package_installed(host):
    assert host.package("datacenter-gpu-manager-exporter").is_installed


def test_dropin_runs_remote_mode_on_our_listener(host):
    dropin = host.file(DROPIN)
    assert dropin.user == "root" and dropin.mode == 0o644
    execstart = [line for line in dropin.content_string.splitlines() if line.startswith("ExecStart=")]
    assert execstart[0] == "ExecStart="
    argv = execstart[1][len("ExecStart="):].split()
    assert argv[0] == "/usr/bin/dcgm-exporter"
    assert argv[argv.index("-r") + 1] == engine(host)
    assert argv[argv.index("-a") + 1] == "127.0.0.1:%d" % exporter_port(host)
    assert argv[argv.index("-f") + 1] == COUNTERS


def test_running_exporter_reads_the_host_engine(host):
    # Remote mode: the running process got -r, so it started no engine of its own.
    pid = host.check_output("systemctl show -p MainPID --value nvidia-dcgm-exporter")
    argv = host.file("/proc/%s/cmdline" % pid).content_string.split("\0")
    assert argv[argv.index("-r") + 1] == engine(host)


def test_counters_file_has_the_defaults_and_the_extra_counter(host):
    text = host.file(COUNTERS).content_string
    records = list(csv.reader(line for line in text.splitlines() if line and not line.startswith("#")))
    names = [record[0] for record in records]
    assert EXTRA in names
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= set(names)
    assert all(len(record) == 3 for record in records)


def test_web_config_file(host):
    expected = web_config(host)
    config = host.file(WEB_CONFIG)
    if not expected:
        assert not config.exists
        return
    assert config.user == "root" and config.group == "root"
    assert config.mode == 0o600
    written = yaml.safe_load(config.content_string)
    # The TLS files are the copies in the exporter's runtime directory.
    tls = dict(expected.get("tls_server_config", {}), cert_file=RUNTIME + "/tls.crt", key_file=RUNTIME + "/tls.key")
    assert written == dict(expected, tls_server_config=tls) if "tls_server_config" in expected else written == expected


def test_exporter_runs_unprivileged_in_the_engines_socket_group(host):
    pid = host.check_output("systemctl show -p MainPID --value nvidia-dcgm-exporter")
    status = host.file("/proc/%s/status" % pid).content_string
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
    assert host.check_output("getent passwd %s" % uid).split(":")[0] == USER
    assert re.search(r"^CapEff:\s+0+$", status, re.M), status
    groups = set(re.search(r"^Groups:\s*(.*)$", status, re.M).group(1).split())
    if engine(host).startswith("unix://"):
        assert host.check_output("getent group nvidia-dcgm-clients").split(":")[2] in groups
    else:
        found = host.run("getent group nvidia-dcgm-clients")
        assert found.rc != 0 or found.stdout.split(":")[2] not in groups


def test_exporter_unit_is_sandboxed(host):
    # docs/security.md records the levels: 9.6 for the packaged unit with the earlier drop-in.
    shown = host.check_output("systemd-analyze security --no-pager nvidia-dcgm-exporter.service")
    level = float(re.search(r"Overall exposure level for nvidia-dcgm-exporter.service: ([0-9.]+)", shown).group(1))
    # Shown in pytest's warnings summary, for docs/security.md.
    warnings.warn("systemd-analyze security nvidia-dcgm-exporter.service on %s: %.1f" % (host.backend.host, level))
    assert level <= 2.0, shown


def test_tls_key_copy_is_the_exporters_alone(host):
    if "tls_server_config" not in web_config(host):
        pytest.skip("no TLS on this host")
    copy = host.file(RUNTIME + "/tls.key")
    assert (copy.user, copy.mode) == (USER, 0o400)
    assert host.file(RUNTIME).mode == 0o700
    original = host.file(web_config(host)["tls_server_config"]["key_file"])
    assert (original.user, original.mode & 0o077) == ("root", 0)


def test_service_enabled_and_active(host):
    service = host.service("nvidia-dcgm-exporter")
    assert service.is_enabled
    assert service.is_running


def test_exporter_listens_on_loopback_only(host):
    # The exporter no longer runs as root, and the containers' root has no
    # CAP_SYS_PTRACE to read another account's sockets (ss -p shows no owner):
    # the listeners on its port are read instead (host networking: the other
    # host's exporter uses another port).
    port = exporter_port(host)
    bound = set(line.split()[3] for line in host.check_output("ss -H -ltn").splitlines()
                if line.split()[3].rsplit(":", 1)[-1] == str(port))
    assert bound == {"127.0.0.1:%d" % port}
    assert listeners(host, "dcgm-exporter") <= bound


def test_metrics_carry_every_counter_for_every_gpu(host):
    answer = scrape(host)
    assert answer["status"] == 200
    body = answer["body"]
    expected = gpus(host)
    hostname = host.check_output("hostname")
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", EXTRA):
        samples = re.findall(r"^%s\{([^}]*)\} \S+$" % name, body, re.M)
        labels = [dict(re.findall(r'(\w+)="([^"]*)"', sample)) for sample in samples]
        assert {label["gpu"]: label["UUID"] for label in labels} == expected, name
        assert {label["Hostname"] for label in labels} == {hostname}
        assert all("DCGM_FI_DRIVER_VERSION" in label for label in labels)


def test_metrics_need_credentials_when_basic_auth_is_set(host):
    if "basic_auth_users" not in web_config(host):
        pytest.skip("no basic auth on this host")
    assert scrape(host, with_credentials=False)["status"] == 401
