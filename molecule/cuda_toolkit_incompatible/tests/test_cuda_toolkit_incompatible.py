"""A toolkit newer than the driver supports: the role stops early, names the
toolkit, its minimum driver and the installed driver, and installs nothing."""
import re


def test_failure_message_names_toolkit_minimum_and_current_driver(host):
    message = host.file("/var/lib/gpufleet-test/cuda_toolkit_incompatible.txt").content_string
    installed = host.package("libcuda1").version.split("-")[0]
    assert "CUDA toolkit 13.0 needs NVIDIA driver 580.65.06 or newer" in message
    assert "is %s (installed package" % installed in message
    assert "cuda_toolkit_forward_compat" in message


def test_driver_is_left_as_it_was(host):
    installed = host.check_output("dpkg-query -W -f '${Package} ${Version}\\n'").splitlines()
    drivers = [line for line in installed
               if re.match(r"^(nvidia-driver|cuda-drivers|nvidia-open|nvidia-kernel|libcuda1|nvidia-smi)", line)]
    assert drivers
    assert all(line.split()[1].startswith("570.") for line in drivers), drivers


def test_no_toolkit_or_compat_package_installed(host):
    names = host.check_output("dpkg-query -W -f '${Package} ${Status}\\n'").splitlines()
    cuda = [n for n in names if re.match(r"^(cuda-toolkit|cuda-compat|cuda-nvcc|cuda-cudart)", n) and "installed" in n]
    assert cuda == []


def test_nothing_of_the_environment_written(host):
    for path in ("/usr/local/cuda", "/usr/local/cuda-12.8", "/usr/local/cuda-13.0", "/etc/profile.d/cuda.sh",
                 "/etc/ld.so.conf.d/cuda.conf", "/etc/alternatives/cuda"):
        assert not host.file(path).exists, path
    assert host.run("update-alternatives --query cuda").rc != 0
