"""cuDNN for the default toolkit's CUDA major, pinned and held where asked,
the header agreeing with the library, and nothing for another CUDA major."""
import json
import re

from gpufleet_packages import held, is_el, version

# The simulated repository's cuDNN releases (tests/nvidia_sim/repo/catalog.py).
NEWEST_FOR_CUDA12 = "9.13.0.50"
PINNED = {"9.10": "9.10.2.21"}


def host_vars(host):
    return host.ansible.get_variables()


def expected_version(host):
    pin = host_vars(host).get("cudnn_version", "")
    return PINNED[pin] if pin else NEWEST_FOR_CUDA12


def dev(host, cuda_major):
    """NVIDIA's headers package: -dev- in the apt repositories, -devel- in the EL ones."""
    return "libcudnn9-%s-cuda-%s" % ("devel" if is_el(host) else "dev", cuda_major)


def test_runtime_and_headers_for_cuda_12(host):
    for name in ("libcudnn9-cuda-12", dev(host, 12)):
        assert version(host, name) == expected_version(host) + "-1", name


def test_meta_package_only_when_unversioned(host):
    pinned = bool(host_vars(host).get("cudnn_version"))
    assert host.package("cudnn9-cuda-12").is_installed is not pinned


def test_nothing_for_cuda_13(host):
    for name in ("libcudnn9-cuda-13", dev(host, 13), "cudnn9-cuda-13"):
        assert not host.package(name).is_installed, name


def test_header_version_is_the_library_version(host):
    header = host.file("/usr/include/cudnn_version.h").content_string
    found = dict(re.findall(r"(?m)^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) (\d+)", header))
    assert "%(MAJOR)s.%(MINOR)s.%(PATCHLEVEL)s" % found == ".".join(expected_version(host).split(".")[:3])


def test_held_only_where_asked(host):
    # apt-mark holds, or dnf versionlock entries on the EL host.
    ours = {"libcudnn9-cuda-12", dev(host, 12)}
    assert ours & held(host) == (ours if host_vars(host).get("cudnn_hold") else set())


def test_cuda_major_matches_the_default_toolkit(host):
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.8"
    facts = json.loads(host.file("/var/lib/gpufleet-test/cudnn_facts.json").content_string)
    assert facts["cuda_major"] == "12"
    assert facts["version"] == expected_version(host)
    assert "libcudnn9-cuda-12" in facts["packages"]
