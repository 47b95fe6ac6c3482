# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container toolkit, DCGM, dcgm-exporter, cuda-keyring and the simulator
runtime package."""

import generated_files as gen
import maint_scripts as scripts
from debpkg import Package, Symlink, Text

CTK_REPO = ("container-toolkit",)


def version_marker(component, version):
    """usr/share/nvidia-sim/<component>-version: the version of the package
    that ships a simulated tool, read by that tool (nvsim)."""
    return Text("/usr/share/nvidia-sim/%s-version" % component, version + "\n")


def sim_runtime(version, payload, extra_repos=()):
    return Package(
        "nvidia-sim-runtime", version,
        "simulated NVIDIA stack: shared runtime (nvsim, GPU profiles, nvidia-sim-hw)\n"
        "Not an NVIDIA package: every simulated package that ships a simulated\n"
        "tool depends on it.",
        section="misc", architecture="all", files=tuple(payload["sim-runtime"]),
        repos=("cuda",) + CTK_REPO + tuple(extra_repos))


def container_toolkit(version, cdi_refresh, payload):
    """The four packages of one NVIDIA Container Toolkit release."""
    v = version + "-1"
    lib = "/usr/lib/x86_64-linux-gnu/libnvidia-container.so.%s" % version
    base_files = tuple(payload["nvidia-ctk"]) + (
        Text("/usr/bin/nvidia-container-runtime", gen.version_script(
            ["NVIDIA Container Runtime version %s" % version, "spec: 1.2.1"], "nvidia-container-runtime"), 0o755),
        Text("/usr/bin/nvidia-cdi-hook", gen.version_script(
            ["NVIDIA CDI Hook version %s" % version], "nvidia-cdi-hook"), 0o755),
        version_marker("container-toolkit", version),
    )
    if cdi_refresh:
        base_files += tuple(payload["cdi-refresh"])
    return [
        Package("libnvidia-container1", v, "NVIDIA container runtime library", section="libs",
                source="libnvidia-container", repos=CTK_REPO,
                files=(Text(lib, gen.placeholder("libnvidia-container " + version)),
                       Symlink("/usr/lib/x86_64-linux-gnu/libnvidia-container.so.1", lib.rsplit("/", 1)[1]))),
        Package("libnvidia-container-tools", v, "NVIDIA container runtime library (command-line tools)",
                section="utils", source="libnvidia-container", repos=CTK_REPO,
                depends=("libnvidia-container1 (>= %s)" % version,),
                files=(Text("/usr/bin/nvidia-container-cli", gen.version_script(
                    ["cli-version: %s" % version, "lib-version: %s" % version, "build platform: x86_64"],
                    "nvidia-container-cli"), 0o755),)),
        Package("nvidia-container-toolkit-base", v, "NVIDIA Container Toolkit Base", section="utils",
                source="nvidia-container-toolkit", repos=CTK_REPO, depends=("nvidia-sim-runtime",),
                breaks=("nvidia-container-toolkit (<< 1.10.0-1)",),
                replaces=("nvidia-container-toolkit (<< 1.10.0-1)",),
                files=base_files, postinst=scripts.container_toolkit_base_postinst(cdi_refresh)),
        Package("nvidia-container-toolkit", v, "NVIDIA Container toolkit", section="utils",
                source="nvidia-container-toolkit", repos=CTK_REPO,
                depends=("nvidia-container-toolkit-base (= %s)" % v, "libnvidia-container-tools (= %s)" % v,
                         "libnvidia-container-tools (<< 2.0.0)"),
                breaks=("nvidia-container-runtime (<= 3.5.0-1)", "nvidia-container-runtime-hook"),
                replaces=("nvidia-container-runtime (<= 3.5.0-1)", "nvidia-container-runtime-hook"),
                files=(Text("/usr/bin/nvidia-container-runtime-hook", gen.version_script(
                    ["NVIDIA Container Runtime Hook version %s" % version], "nvidia-container-runtime-hook"),
                    0o755),)),
    ]


def dcgm4(version, payload):
    """DCGM 4 split packages (NVIDIA/DCGM cmake/packaging.cmake), epoch 1."""
    v = "1:%s-1" % version
    core = "datacenter-gpu-manager-4-core"
    eq_core = "%s (= %s)" % (core, v)
    packages = [
        Package(core, v, "CUDA-version agnostic components of NVIDIA Datacenter GPU Manager (DCGM)",
                section="multiverse/devel", conflicts=("datacenter-gpu-manager",),
                depends=("nvidia-sim-runtime",),
                files=tuple(payload["dcgm"]) + (version_marker("dcgm", version),),
                postinst=scripts.dcgm_core_postinst()),
        Package("datacenter-gpu-manager-4-proprietary", v,
                "Proprietary components of NVIDIA Datacenter GPU Manager (DCGM)",
                depends=(eq_core,), files=(version_marker("dcgm-proprietary", version),)),
    ]
    for cuda in ("12", "13"):
        name = "datacenter-gpu-manager-4-cuda%s" % cuda
        packages.append(Package(
            name, v, "NVIDIA Datacenter GPU Manager (DCGM) binaries for CUDA%s systems" % cuda,
            depends=(eq_core,), provides=("datacenter-gpu-manager-4 (= %s)" % v,),
            files=(version_marker("dcgm-cuda%s" % cuda, version),)))
        packages.append(Package(
            "datacenter-gpu-manager-4-proprietary-cuda%s" % cuda, v,
            "Proprietary NVIDIA Datacenter GPU Manager (DCGM) binaries for CUDA%s systems" % cuda,
            depends=("datacenter-gpu-manager-4-proprietary (= %s)" % v, "%s (= %s)" % (name, v)),
            files=(version_marker("dcgm-proprietary-cuda%s" % cuda, version),)))
    return packages


def dcgm3(version, payload):
    """Legacy monolithic DCGM 3 (version 1:3.x.y, no Debian revision)."""
    return Package(
        "datacenter-gpu-manager", "1:%s" % version, "NVIDIA Datacenter GPU Management Tools",
        provides=("dcgm",), depends=("nvidia-sim-runtime",),
        conflicts=("datacenter-gpu-manager-fabricmanager", "datacenter-gpu-manager-dcp-nda-only"),
        files=tuple(payload["dcgm"]) + (version_marker("dcgm", version),),
        postinst=scripts.dcgm_core_postinst())


def dcgm_exporter(version, min_dcgm, payload):
    return Package(
        "datacenter-gpu-manager-exporter", version + "-1", "NVIDIA DCGM Exporter (Prometheus metrics)",
        depends=("datacenter-gpu-manager-4-core (>= %s)" % min_dcgm, "nvidia-sim-runtime"),
        files=tuple(payload["dcgm-exporter"]) + (version_marker("dcgm-exporter", version),))


def cuda_keyring(distro, version, keyring, keyid, year, repo_url):
    """cuda-keyring for one distro directory: the archive key and a .list
    pointing at this mirror (NVIDIA/apt-packaging-cuda-keyring)."""
    keyring_path = "/usr/share/keyrings/cuda-archive-keyring.gpg"
    return Package(
        "cuda-keyring", version,
        "GPG keyring for the CUDA repository\nEnrolls public key: %s (%s)\nand enables repo: %s/x86_64"
        % (keyid, year, distro),
        architecture="all", repos=("cuda:%s" % distro,),
        files=(Text(keyring_path, keyring),
               Text("/etc/apt/sources.list.d/cuda-%s-x86_64.list" % distro,
                    gen.apt_source_line(keyring_path, repo_url))))
