"""A toolkit newer than the driver supports (incompatible.yml, run on the 570
host before the toolkits are installed): the role stopped early and named the
toolkit, its minimum driver and the installed driver. That it changed nothing
(driver packages, no toolkit or compat package, no environment written) was
asserted by the play itself, from snapshots taken before and after the role."""

from gpufleet_packages import installed as packages
from gpufleet_packages import upstream

# The host with the 570 driver; the other hosts' 580 driver runs CUDA 13.0.
testinfra_hosts = ["cuda_toolkit-ubuntu2404"]


def test_failure_message_names_toolkit_minimum_and_current_driver(host):
    message = host.file("/var/lib/gpufleet-test/cuda_toolkit_incompatible.txt").content_string
    # NVIDIA's Debian-style libcuda1 or the Ubuntu tree's libnvidia-compute-<branch>.
    installed = upstream(next(iter(packages(host, "libcuda1", "libnvidia-compute-*").values())))
    assert installed.startswith("570.")
    assert "CUDA toolkit 13.0 needs NVIDIA driver 580.65.06 or newer" in message
    assert "is %s (installed package" % installed in message
    assert "cuda_toolkit_forward_compat" in message
