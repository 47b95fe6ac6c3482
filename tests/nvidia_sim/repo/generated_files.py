# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Contents of the files the build generates (not taken from the payload).

Formats follow the real files (nvcc banner, version.json, cuDNN version
header, dkms.conf); values come from the catalog.
"""

import json


def nvcc_script(release):
    """/usr/local/cuda-X.Y/bin/nvcc answering --version like the real one."""
    banner = (
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Copyright (c) 2005-%(year)s NVIDIA Corporation\n"
        "Built on %(built_on)s\n"
        "Cuda compilation tools, release %(release)s, V%(nvcc)s\n"
        "Build cuda_%(release)s.r%(release)s/compiler.%(build)s_0\n"
    ) % {"year": release["year"], "built_on": release["nvcc_built_on"],
         "release": release["release"], "nvcc": release["nvcc"], "build": release["nvcc_build"]}
    return (
        "#!/bin/sh\n"
        "# Simulated nvcc (gpufleet.nvidia test double): only the version is simulated.\n"
        "for arg in \"$@\"; do\n"
        "    case \"$arg\" in\n"
        "    --version|-V)\n"
        "        cat <<'EOF'\n" + banner + "EOF\n"
        "        exit 0 ;;\n"
        "    esac\n"
        "done\n"
        "if [ $# -eq 0 ]; then\n"
        "    echo 'nvcc fatal   : No input files specified; use option --help for more information' >&2\n"
        "    exit 1\n"
        "fi\n"
        "echo 'nvcc (simulated): compiling is not simulated' >&2\n"
        "exit 1\n")


def cuda_version_json(release):
    data = {
        "cuda": {"name": "CUDA SDK", "version": release["toolkit"]},
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": release["cudart"]},
        "cuda_nvcc": {"name": "CUDA NVCC", "version": release["nvcc"]},
    }
    return json.dumps(data, indent=3, sort_keys=True) + "\n"


def cuda_runtime_api_h(release):
    major, minor = release["release"].split(".")
    return (
        "/* Simulated CUDA runtime header (gpufleet.nvidia test double). */\n"
        "#ifndef __CUDA_RUNTIME_API_H__\n#define __CUDA_RUNTIME_API_H__\n"
        "#define CUDART_VERSION %d\n#endif\n" % (int(major) * 1000 + int(minor) * 10))


def ld_so_conf(path):
    return path + "\n"


def cudnn_version_h(version):
    major, minor, patch = version.split(".")[:3]
    return (
        "/* Simulated cuDNN version header (gpufleet.nvidia test double). */\n"
        "#ifndef CUDNN_VERSION_H_\n#define CUDNN_VERSION_H_\n\n"
        "#define CUDNN_MAJOR %s\n#define CUDNN_MINOR %s\n#define CUDNN_PATCHLEVEL %s\n\n"
        "#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n\n"
        "#endif /* CUDNN_VERSION_H */\n" % (major, minor, patch))


def cudnn_h():
    return ("/* Simulated cuDNN header (gpufleet.nvidia test double). */\n"
            "#include \"cudnn_version.h\"\n")


def placeholder(what):
    """Content of a binary the simulator does not need to execute."""
    return "simulated %s (gpufleet.nvidia test double)\n" % what


# The kernel modules of a driver release, as the DKMS and the prebuilt
# (linux-restricted-modules) packages ship them.
KERNEL_MODULES = ("nvidia", "nvidia-modeset", "nvidia-drm", "nvidia-uvm", "nvidia-peermem")


def dkms_conf(driver_version, flavour):
    lines = [
        "# Simulated DKMS module (gpufleet.nvidia test double, %s flavour):" % flavour,
        "# the package's postinst writes the build results, nothing is compiled.",
        'PACKAGE_NAME="nvidia"',
        'PACKAGE_VERSION="%s"' % driver_version,
        'AUTOINSTALL="yes"',
        "MAKE[0]=\"'make' -j`nproc` KERNEL_UNAME=${kernelver} modules\"",
    ]
    for index, module in enumerate(KERNEL_MODULES):
        lines.append('BUILT_MODULE_NAME[%d]="%s"' % (index, module))
        lines.append('DEST_MODULE_LOCATION[%d]="/kernel/drivers/video"' % index)
    return "\n".join(lines) + "\n"


def version_script(banner_lines, program):
    """A container-toolkit helper that only answers --version."""
    banner = "".join(line + "\n" for line in banner_lines)
    return (
        "#!/bin/sh\n"
        "# Simulated %(prog)s (gpufleet.nvidia test double): only --version is simulated.\n"
        "case \"$1\" in\n"
        "--version|-v|version)\n"
        "    cat <<'EOF'\n%(banner)sEOF\n"
        "    exit 0 ;;\n"
        "esac\n"
        "echo '%(prog)s (simulated): only --version is simulated' >&2\n"
        "exit 1\n") % {"prog": program, "banner": banner}


def apt_source_line(keyring, url):
    return "deb [signed-by=%s] %s /\n" % (keyring, url)
