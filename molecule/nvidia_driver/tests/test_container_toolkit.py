"""The NVIDIA Container Toolkit as the role leaves it: pinned and held packages
from the signed repository, runtime configurations that kept every setting
they had and name the nvidia runtime, and a CDI specification for every GPU."""
import csv
import io
import json
import os
import sys
import tomllib

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
from host_checks import keyring_primary_fingerprints  # noqa: E402  pylint: disable=wrong-import-position,import-error

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1")
# What molecule/nvidia_driver/files/ put in place before the first converge.
DOCKER_BEFORE = {
    "data-root": "/srv/docker",
    "live-restore": True,
    "log-driver": "json-file",
    "log-opts": {"max-file": "3", "max-size": "100m"},
    "registry-mirrors": ["https://mirror.gcr.io"],
}
CRI = "io.containerd.grpc.v1.cri"


def variables(host):
    return host.ansible.get_variables()


def version(host):
    return str(variables(host).get("container_toolkit_version", "1.18.2"))


def refresh_units(host):
    return tuple(int(p) for p in version(host).split(".")[:2]) >= (1, 18)


def set_as_default(host):
    return bool(variables(host).get("container_toolkit_set_as_default", False))


def gpus(host):
    out = host.check_output("nvidia-smi --query-gpu=index,uuid --format=csv,noheader")
    return [(int(row[0]), row[1].strip()) for row in csv.reader(io.StringIO(out), skipinitialspace=True)]


def read_json(host, path):
    return json.loads(host.file(path).content_string)


def read_toml(host, path):
    f = host.file(path)
    return tomllib.loads(f.content_string) if f.exists else {}


def el(host):
    return any(group.startswith("rocky") for group in variables(host)["group_names"])


@pytest.mark.parametrize("name", PACKAGES)
def test_package_pinned_and_held(host, name):
    pkg = host.package(name)
    assert pkg.is_installed
    if el(host):
        # rpm: version and release apart; the hold is a dnf versionlock entry.
        assert (pkg.version, pkg.release) == (version(host), "1")
        locks = host.file("/etc/dnf/plugins/versionlock.list").content_string.splitlines()
        # dnf versionlock writes the epoch, 0 included.
        assert "%s-0:%s-1.*" % (name, version(host)) in locks
    else:
        assert pkg.version == version(host) + "-1"
        assert name in host.check_output("apt-mark showhold").split()


def test_nvidia_ctk_reports_the_pinned_version(host):
    assert "version %s" % version(host) in host.check_output("nvidia-ctk --version")


def _checked_key_fingerprint():
    # The simulated repository's key, read on the controller where the harness built it.
    repo_dir = os.environ.get("GPUFLEET_TEST_REPO_DIR", "/var/tmp/gpufleet-harness/repo")
    with open(os.path.join(repo_dir, "keys", "nvidia-container-toolkit-fingerprint")) as handle:
        return handle.read().strip()


def test_el_repository_checks_its_signed_metadata_with_the_checked_key(host):
    """NVIDIA signs the rpm repository's metadata (repomd.xml), not the packages."""
    if not el(host):
        pytest.skip("apt host: test_repository_is_a_deb822_source_signed_by_the_checked_key")
    repo = host.file("/etc/yum.repos.d/nvidia-container-toolkit.repo").content_string
    assert "/libnvidia-container/stable/rpm/$basearch" in repo
    assert "repo_gpgcheck = 1" in repo
    key = "/etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-container-toolkit"
    assert "gpgkey = file://%s" % key in repo
    assert keyring_primary_fingerprints(host, key) == [_checked_key_fingerprint()]
    # dnf verifies repomd.xml.asc with it on every metadata download.
    refresh = host.run("dnf -q --refresh --repo nvidia-container-toolkit makecache")
    assert refresh.rc == 0, refresh.stderr


def test_repository_is_a_deb822_source_signed_by_the_checked_key(host):
    if el(host):
        pytest.skip("dnf host: test_el_repository_checks_its_signed_metadata_with_the_checked_key")
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc" in source
    assert "/libnvidia-container/stable/deb/amd64/" in source
    assert "Trusted" not in source
    assert keyring_primary_fingerprints(host, "/etc/apt/keyrings/nvidia-container-toolkit.asc") == [
        _checked_key_fingerprint()]
    # NVIDIA's install guide's one-line source would clash with it.
    assert not host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").exists


def test_docker_kept_its_settings_and_gained_the_nvidia_runtime(host):
    config = read_json(host, "/etc/docker/daemon.json")
    for key, value in DOCKER_BEFORE.items():
        assert config[key] == value, key
    assert config["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    if set_as_default(host):
        assert config["default-runtime"] == "nvidia"
    else:
        assert "default-runtime" not in config


def containerd_documents(host):
    main = read_toml(host, "/etc/containerd/config.toml")
    docs = [main]
    if "/etc/containerd/conf.d/*.toml" in main.get("imports", []):
        docs.append(read_toml(host, "/etc/containerd/conf.d/99-nvidia.toml"))
    return main, docs


def test_containerd_kept_its_settings(host):
    main = containerd_documents(host)[0]
    assert main["version"] == 2
    assert main["root"] == "/var/lib/containerd"
    assert main["oom_score"] == -999
    assert main["grpc"] == {"address": "/run/containerd/containerd.sock", "max_recv_message_size": 16777216}
    cri = main["plugins"][CRI]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.9"
    assert cri["registry"] == {"config_path": "/etc/containerd/certs.d"}
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    assert cri["containerd"]["runtimes"]["runc"] == {"runtime_type": "io.containerd.runc.v2",
                                                     "options": {"SystemdCgroup": True}}


def test_containerd_names_the_nvidia_runtime_with_runc_options(host):
    docs = containerd_documents(host)[1]
    runtimes = [d["plugins"][CRI]["containerd"]["runtimes"]["nvidia"] for d in docs
                if "nvidia" in d.get("plugins", {}).get(CRI, {}).get("containerd", {}).get("runtimes", {})]
    assert len(runtimes) == 1
    assert runtimes[0]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # Copied from runc, so the cgroup driver stays the same.
    assert runtimes[0]["options"]["SystemdCgroup"] is True
    defaults = [d["plugins"][CRI]["containerd"].get("default_runtime_name") for d in docs
                if "containerd" in d.get("plugins", {}).get(CRI, {})]
    assert ("nvidia" in defaults) == set_as_default(host)


def crio_configured(host):
    return "crio" in (variables(host).get("container_toolkit_runtimes") or []) or crio_had_config(host)


def crio_had_config(host):
    return bool(variables(host).get("ctk_test_crio_config"))


def test_crio_when_listed_or_found(host):
    if not crio_configured(host):
        pytest.skip("crio is not configured on this host")
    docs = [read_toml(host, "/etc/crio/crio.conf"), read_toml(host, "/etc/crio/conf.d/99-nvidia.toml")]
    nvidia = [d["crio"]["runtime"]["runtimes"]["nvidia"] for d in docs
              if "nvidia" in d.get("crio", {}).get("runtime", {}).get("runtimes", {})]
    assert len(nvidia) == 1 and nvidia[0]["runtime_path"] == "/usr/bin/nvidia-container-runtime"
    if crio_had_config(host):
        # Copied from the default runtime (crun), as for containerd's runc.
        assert nvidia[0]["runtime_type"] == "oci"


def _leaves(document, prefix=()):
    for key, value in document.items():
        if isinstance(value, dict):
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


@pytest.mark.parametrize("path, source", [("/etc/crio/crio.conf", "crio.conf"),
                                          ("/etc/crio/crio.conf.d/10-site.conf", "crio-site.conf")])
def test_crio_kept_its_settings(host, path, source):
    if not crio_had_config(host):
        pytest.skip("this host had no CRI-O configuration of its own")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "files", source), "rb") as handle:
        before = tomllib.load(handle)
    after = read_toml(host, path)
    for key, value in _leaves(before):
        node = after
        for part in key:
            node = node[part]
        assert node == value, (path, key)


def cdi_spec_path(host):
    return "/var/run/cdi/nvidia.yaml" if refresh_units(host) else "/etc/cdi/nvidia.yaml"


def test_cdi_spec_describes_every_gpu(host):
    spec = yaml.safe_load(host.file(cdi_spec_path(host)).content_string)
    assert spec["kind"] == "nvidia.com/gpu"
    names = {d["name"]: d for d in spec["devices"]}
    for index, uuid in gpus(host):
        for name in (str(index), uuid):
            assert names[name]["containerEdits"]["deviceNodes"] == [{"path": "/dev/nvidia%d" % index}]
    assert {n["path"] for n in names["all"]["containerEdits"]["deviceNodes"]} >= {
        "/dev/nvidia%d" % gpu[0] for gpu in gpus(host)}


def test_only_one_cdi_spec_for_the_gpus(host):
    other = "/etc/cdi/nvidia.yaml" if refresh_units(host) else "/var/run/cdi/nvidia.yaml"
    assert not host.file(other).exists


def test_nvidia_ctk_cdi_list_lists_every_gpu(host):
    listed = set(host.check_output("nvidia-ctk cdi list").split())
    for index, uuid in gpus(host):
        assert "nvidia.com/gpu=%d" % index in listed
        assert "nvidia.com/gpu=%s" % uuid in listed


def test_cdi_refresh_units(host):
    if not refresh_units(host):
        assert not host.file("/etc/systemd/system/nvidia-cdi-refresh.path").exists
        return
    assert host.service("nvidia-cdi-refresh.path").is_enabled
    assert host.service("nvidia-cdi-refresh.path").is_running
    assert host.service("nvidia-cdi-refresh.service").is_enabled


def test_state_file_records_what_the_spec_was_made_for(host):
    state = read_json(host, "/var/lib/gpufleet/container-toolkit-cdi.json")
    driver = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()[0].strip()
    assert state["driver_version"] == driver
    assert state["spec"] == cdi_spec_path(host)
    assert state["gpu_uuids"] == [gpu[1] for gpu in gpus(host)]
    assert state["toolkit_version"] == version(host) + "-1"


def test_cve_mitigation_only_with_an_accepted_vulnerable_version(host):
    config = read_toml(host, "/etc/nvidia-container-runtime/config.toml")
    spec = host.file(cdi_spec_path(host)).content_string
    if variables(host).get("container_toolkit_accept_vulnerable_version"):
        assert config["features"]["disable-cuda-compat-lib-hook"] is True
        # The hook CVE-2025-23266 abuses is gone from the specification.
        assert "enable-cuda-compat" not in spec
    else:
        assert "disable-cuda-compat-lib-hook" not in config.get("features", {})
        assert "enable-cuda-compat" in spec


def test_requested_toolkit_settings(host):
    settings = variables(host).get("container_toolkit_config_settings") or {}
    config = read_toml(host, "/etc/nvidia-container-runtime/config.toml")
    for key, value in settings.items():
        node = config
        for part in key.split("."):
            node = node[part]
        assert node == value, key
    # nvidia-ctk kept the rest of its configuration.
    assert config["nvidia-container-runtime"]["mode"] == "auto"
