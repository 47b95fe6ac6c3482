"""A toolkit newer than the driver supports (incompatible.yml, run on the 570
host before the toolkits are installed): the role stopped early and named the
toolkit, its minimum driver and the installed driver. That it changed nothing
(driver packages, no toolkit or compat package, no environment written) was
asserted by the play itself, from snapshots taken before and after the role."""

# The host with the 570 driver; the Debian 12 host's 580 driver runs CUDA 13.0.
testinfra_hosts = ["cuda_toolkit-debian13"]


def test_failure_message_names_toolkit_minimum_and_current_driver(host):
    message = host.file("/var/lib/gpufleet-test/cuda_toolkit_incompatible.txt").content_string
    installed = host.package("libcuda1").version.split("-")[0]
    assert installed.startswith("570.")
    assert "CUDA toolkit 13.0 needs NVIDIA driver 580.65.06 or newer" in message
    assert "is %s (installed package" % installed in message
    assert "cuda_toolkit_forward_compat" in message
