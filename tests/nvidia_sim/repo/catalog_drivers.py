# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Driver packages of one driver version: NVIDIA's Debian-style pieces and
meta packages, the Ubuntu-style branch-named tree, Fabric Manager and NSCQ.

Every piece depends on its siblings with ``(= <version>-1)`` so that a
transaction mixing two driver versions is unsatisfiable.
"""

import generated_files as gen
import maint_scripts as scripts
from catalog_tools import version_marker
from debpkg import Package, Text

REVISION = "-1"
# Which of NVIDIA's CUDA repositories carry which meta packages (catalog.CUDA_DISTROS).
DEBIAN_DISTROS = ("debian12", "debian13")
UBUNTU_DISTROS = ("ubuntu2204", "ubuntu2404")


def _eq(name, version):
    return "%s (= %s)" % (name, version)


def kernel_module_files(driver, flavour):
    return (
        Text("/usr/src/nvidia-%s/dkms.conf" % driver, gen.dkms_conf(driver, flavour)),
        Text("/usr/share/nvidia-sim/kernel-module-flavour", flavour + "\n"),
    )


def firmware_files(driver):
    return tuple(Text("/lib/firmware/nvidia/%s/%s" % (driver, name), gen.placeholder("GSP firmware " + name))
                 for name in ("gsp_ga10x.bin", "gsp_tu10x.bin"))


# Source packages of the Debian pieces (apt preferences may pin by src:).
DEBIAN_SOURCES = {
    "nvidia-kernel-open-dkms": "nvidia-open-gpu-kernel-modules",
    "nvidia-persistenced": "nvidia-persistenced",
    "nvidia-modprobe": "nvidia-modprobe",
    "nvidia-settings": "nvidia-settings",
    "nvidia-xconfig": "nvidia-xconfig",
}


def utils_files(driver, payload):
    return tuple(payload["driver-utils"]) + (
        Text("/usr/share/nvidia-sim/driver-version", driver + "\n"),)


def nvml_files(driver):
    """The NVML library package's marker: without it the simulated nvidia-smi
    cannot load libnvidia-ml.so.1 (exit 12), as the real one."""
    return (version_marker("nvml", driver),)


def debian_pieces(driver, payload):
    """The unversioned Debian piece names of NVIDIA's CUDA repository."""
    v = driver + REVISION

    def eq(name):
        return _eq(name, v)

    kernel_any = "nvidia-kernel-dkms (= %s) | nvidia-kernel-%s | nvidia-open-kernel-%s" % (v, driver, driver)
    sim = "nvidia-sim-runtime"
    pieces = [
        Package("nvidia-alternative", v, "allows the selection of NVIDIA as GLX provider",
                section="non-free/libs"),
        Package("nvidia-modprobe", v, "utility to load NVIDIA kernel modules and create device nodes",
                section="contrib/utils"),
        Package("firmware-nvidia-gsp", v, "NVIDIA GSP firmware", section="non-free-firmware/kernel",
                files=firmware_files(driver)),
        Package("nvidia-kernel-support", v, "NVIDIA binary kernel module support files",
                section="non-free/kernel", depends=(eq("nvidia-alternative"), "nvidia-modprobe (>= %s)" % driver),
                provides=("nvidia-kernel-support-any",)),
        Package("nvidia-kernel-dkms", v, "NVIDIA binary kernel module DKMS source",
                section="non-free/kernel",
                depends=(eq("nvidia-kernel-support"), eq("firmware-nvidia-gsp")),
                provides=("nvidia-kernel-%s" % driver,), conflicts=("nvidia-kernel-open-dkms",),
                files=kernel_module_files(driver, "proprietary"),
                postinst=scripts.dkms_postinst(driver), prerm=scripts.dkms_prerm(driver)),
        Package("nvidia-kernel-open-dkms", v, "NVIDIA open kernel module DKMS source",
                section="non-free/kernel",
                depends=(eq("nvidia-kernel-support"), eq("firmware-nvidia-gsp")),
                provides=("nvidia-open-kernel-%s" % driver,), conflicts=("nvidia-kernel-dkms",),
                files=kernel_module_files(driver, "open"),
                postinst=scripts.dkms_postinst(driver), prerm=scripts.dkms_prerm(driver)),
        Package("libnvidia-ml1", v, "NVIDIA Management Library (NVML) runtime library",
                section="non-free/libs", depends=(eq("nvidia-alternative"),), files=nvml_files(driver)),
        Package("nvidia-smi", v, "NVIDIA System Management Interface", section="non-free/utils",
                depends=(eq("libnvidia-ml1"), eq("nvidia-alternative"), sim),
                files=utils_files(driver, payload), postinst=scripts.driver_utils_postinst(driver)),
        Package("libnvidia-ptxjitcompiler1", v, "NVIDIA PTX JIT Compiler library",
                section="non-free/libs", depends=(eq("nvidia-alternative"),)),
        Package("libcuda1", v, "NVIDIA CUDA Driver Library", section="non-free/libs",
                depends=(eq("nvidia-alternative"), eq("libnvidia-ptxjitcompiler1")),
                recommends=(kernel_any, eq("nvidia-smi"), eq("libnvidia-cfg1"), eq("nvidia-persistenced"))),
        Package("libnvidia-cfg1", v, "NVIDIA binary OpenGL/GLX configuration library",
                section="non-free/libs", depends=(eq("nvidia-alternative"),)),
        Package("nvidia-persistenced", v, "daemon to maintain persistent software state in the NVIDIA driver",
                section="contrib/utils", depends=(eq("libnvidia-cfg1"), sim),
                files=tuple(payload["persistenced"]), postinst=scripts.persistenced_postinst()),
        Package("nvidia-cuda-mps", v, "NVIDIA CUDA Multi Process Service (MPS)",
                section="non-free/utils", depends=(eq("libcuda1"),)),
        Package("nvidia-driver-libs", v, "NVIDIA metapackage (OpenGL/GLX/EGL/GLES libraries)",
                section="non-free/libs", depends=(eq("nvidia-alternative"),), recommends=(eq("libnvidia-cfg1"),)),
        Package("nvidia-settings", v, "tool for configuring the NVIDIA graphics driver",
                section="contrib/x11"),
        Package("nvidia-xconfig", v, "deprecated X configuration tool for non-free NVIDIA drivers",
                section="contrib/x11"),
        Package("nvidia-driver", v, "NVIDIA metapackage", section="non-free/x11",
                depends=(eq("nvidia-driver-libs"), eq("nvidia-alternative"), eq("nvidia-kernel-support"), kernel_any),
                recommends=(eq("nvidia-smi"), eq("nvidia-persistenced"), eq("nvidia-settings"), eq("libnvidia-cfg1"))),
        Package("nvidia-driver-cuda", v, "NVIDIA driver CUDA integration components (compute-only)",
                section="non-free/libs",
                depends=(eq("libcuda1"), eq("nvidia-smi"), eq("libnvidia-ml1"), eq("nvidia-cuda-mps"),
                         eq("nvidia-persistenced"), eq("libnvidia-cfg1"))),
    ]
    for package in pieces:
        package.source = DEBIAN_SOURCES.get(package.name, "nvidia-graphics-drivers")
    return pieces


def debian_metas(branch, driver, open_meta):
    """cuda-drivers-<branch>, cuda-drivers and (from 560) nvidia-open.

    As NVIDIA's, they name the pieces with (>= <version>): without a pin apt
    takes the newest pieces of any branch (nvidia-driver-pinning-* exists
    for that reason).
    """
    v = driver + REVISION

    def ge(name):
        return "%s (>= %s)" % (name, driver)

    common = (ge("nvidia-driver"), ge("nvidia-driver-cuda"), ge("nvidia-settings"), ge("nvidia-xconfig"))
    # Only in the Debian repositories: the Ubuntu ones have metas of the same
    # names over the branch-named tree (ubuntu_metas).
    repos = tuple("cuda:%s" % distro for distro in DEBIAN_DISTROS)
    packages = [
        Package("cuda-drivers-%s" % branch, v, "CUDA Driver meta-package, branch-specific", source="cuda-drivers",
                depends=(ge("nvidia-kernel-dkms"),) + common, repos=repos),
        Package("cuda-drivers", v, "CUDA Driver meta-package, branch-agnostic", source="cuda-drivers",
                depends=(ge("cuda-drivers-%s" % branch),), repos=repos),
    ]
    if open_meta:
        packages.append(Package("nvidia-open", v, "NVIDIA driver with open kernel modules meta-package",
                                source="nvidia-open", depends=(ge("nvidia-kernel-open-dkms"),) + common, repos=repos))
    return packages


def ubuntu_metas(branch, driver, open_meta):
    """cuda-drivers-<branch>, cuda-drivers and (from 560) nvidia-open-<branch>
    of NVIDIA's ubuntu2204/ubuntu2404 repositories, over the branch-named
    tree: the proprietary meta names nvidia-driver-<branch>, the open one
    nvidia-driver-<branch>-open, with (>=) as NVIDIA's metas do. Which other
    pieces the real Ubuntu metas name is not verified (the research in
    docs/reference/platform-package-facts.md covers Canonical's archive);
    the role asks for the branch-named packages itself (vars/Ubuntu.yml)."""
    v = driver + REVISION
    repos = tuple("cuda:%s" % distro for distro in UBUNTU_DISTROS)
    packages = [
        Package("cuda-drivers-%s" % branch, v, "CUDA Driver meta-package, branch-specific", source="cuda-drivers",
                depends=("nvidia-driver-%s (>= %s)" % (branch, driver),), repos=repos),
        Package("cuda-drivers", v, "CUDA Driver meta-package, branch-agnostic", source="cuda-drivers",
                depends=("cuda-drivers-%s (>= %s)" % (branch, driver),), repos=repos),
    ]
    if open_meta:
        packages.append(Package("nvidia-open-%s" % branch, v, "NVIDIA driver with open kernel modules meta-package",
                                source="nvidia-open", depends=("nvidia-driver-%s-open (>= %s)" % (branch, driver),),
                                repos=repos))
    return packages


def pinning(name, version, pattern, description, package_names):
    """nvidia-driver-pinning-<branch|version>: apt preferences that make the
    driver packages of one branch (or one version) the candidates.

    The file ends in .pref: apt ignores preferences.d files whose extension
    is anything else, such as the ".08" of a version.
    """
    text = ("Explanation: %s (simulated nvidia-driver-pinning package, gpufleet.nvidia test double)\n"
            "Package: %s\nPin: version %s\nPin-Priority: 1000\n" % (description, " ".join(sorted(package_names)), pattern))
    return Package(name, version, "NVIDIA driver version locking: %s" % description, architecture="all",
                   source="nvidia-driver-pinning", provides=("nvidia-driver-pinning",),
                   conflicts=("nvidia-driver-pinning",),
                   files=(Text("/etc/apt/preferences.d/%s.pref" % name, text),))


def ubuntu_tree(branch, driver, payload):
    """nvidia-driver-<branch>[-open] and the branch-named pieces they need.

    They carry Ubuntu's names and conflict with the Debian pieces that ship
    the same files, so one host has one family, as on a real host.
    """
    v = driver + REVISION
    b = branch

    def eq(name):
        return _eq(name, v)

    source = "nvidia-graphics-drivers-%s" % b

    def piece(name, description, virtual, conflicts=(), **kwargs):
        # Branch-named pieces provide and conflict with their unversioned
        # name so that two branches never coexist (Ubuntu's idiom).
        return Package(name, v, description, provides=(virtual,), conflicts=(virtual,) + conflicts,
                       source=source, **kwargs)

    firmware = "nvidia-firmware-%s-%s" % (b, driver)
    sim = "nvidia-sim-runtime"
    packages = [
        Package(firmware, v, "Firmware files used by the kernel module", section="multiverse/libs",
                source=source, conflicts=("firmware-nvidia-gsp",), files=firmware_files(driver)),
        piece("nvidia-kernel-common-%s" % b, "Shared files used with the kernel module",
              "nvidia-kernel-common", ("nvidia-kernel-support",), section="multiverse/libs",
              depends=(eq(firmware),)),
        piece("nvidia-kernel-source-%s" % b, "NVIDIA kernel source package", "nvidia-kernel-source",
              section="multiverse/libs", depends=(eq("nvidia-kernel-common-%s" % b),)),
        piece("nvidia-kernel-source-%s-open" % b, "NVIDIA kernel source package (open)", "nvidia-kernel-source",
              section="multiverse/libs", depends=(eq("nvidia-kernel-common-%s" % b),)),
        piece("nvidia-dkms-%s" % b, "NVIDIA DKMS package", "nvidia-dkms-kernel",
              ("nvidia-kernel-dkms", "nvidia-kernel-open-dkms"), section="multiverse/libs",
              depends=(eq("nvidia-kernel-common-%s" % b), eq("nvidia-kernel-source-%s" % b)),
              files=kernel_module_files(driver, "proprietary"),
              postinst=scripts.dkms_postinst(driver), prerm=scripts.dkms_prerm(driver)),
        piece("nvidia-dkms-%s-open" % b, "NVIDIA DKMS package (open kernel module)", "nvidia-dkms-kernel",
              ("nvidia-kernel-dkms", "nvidia-kernel-open-dkms"), section="multiverse/libs",
              depends=(eq("nvidia-kernel-common-%s" % b), eq("nvidia-kernel-source-%s-open" % b)),
              files=kernel_module_files(driver, "open"),
              postinst=scripts.dkms_postinst(driver), prerm=scripts.dkms_prerm(driver)),
        piece("libnvidia-compute-%s" % b, "NVIDIA libcompute package", "libnvidia-compute",
              ("libcuda1", "libnvidia-ml1"), section="multiverse/libs", files=nvml_files(driver)),
        piece("libnvidia-cfg1-%s" % b, "NVIDIA binary OpenGL/GLX configuration library", "libnvidia-cfg1-any",
              ("libnvidia-cfg1",), section="multiverse/libs"),
        piece("nvidia-utils-%s" % b, "NVIDIA driver support binaries", "nvidia-utils", ("nvidia-smi",),
              section="multiverse/utils", depends=(eq("libnvidia-compute-%s" % b), sim),
              files=utils_files(driver, payload), postinst=scripts.driver_utils_postinst(driver)),
        piece("nvidia-compute-utils-%s" % b, "NVIDIA compute utilities", "nvidia-compute-utils",
              ("nvidia-persistenced", "nvidia-cuda-mps"), section="multiverse/utils",
              depends=(eq("libnvidia-compute-%s" % b), eq("libnvidia-cfg1-%s" % b), sim),
              files=tuple(payload["persistenced"]), postinst=scripts.persistenced_postinst()),
    ]
    userland = (eq("libnvidia-compute-%s" % b), eq("libnvidia-cfg1-%s" % b), eq("nvidia-utils-%s" % b),
                eq("nvidia-compute-utils-%s" % b), eq("nvidia-kernel-common-%s" % b))
    for suffix, description in (("", "NVIDIA driver metapackage"),
                                ("-open", "NVIDIA driver (open kernel) metapackage")):
        packages.append(Package(
            "nvidia-driver-%s%s" % (b, suffix), v, description, section="multiverse/libs", source=source,
            depends=(eq("nvidia-dkms-%s%s" % (b, suffix)), eq("nvidia-kernel-source-%s%s" % (b, suffix))) + userland))
    return packages


def fabric_manager(branch, driver, unversioned, payload):
    """Fabric Manager and NSCQ, named per branch before 580 and without the
    branch from 580 on (gpu-driver-container's install.sh)."""
    v = driver + REVISION
    # NVIDIA's packages carry no dependency on the driver (a mismatch only
    # shows when nv-fabricmanager starts); the simulation makes the exact
    # match a package dependency so apt refuses mixed transactions.
    driver_dep = _eq("nvidia-kernel-support", v) + " | " + _eq("nvidia-kernel-common-%s" % branch, v)
    if unversioned:
        fm_name, fm_rel, nscq_name, nscq_rel = "nvidia-fabricmanager", {}, "libnvidia-nscq", {}
    else:
        fm_name = "nvidia-fabricmanager-%s" % branch
        fm_rel = {"provides": ("nvidia-fabricmanager",), "replaces": ("nvidia-fabricmanager",),
                  "conflicts": ("nvidia-fabricmanager",)}
        nscq_name = "libnvidia-nscq-%s" % branch
        nscq_rel = {"provides": ("libnvidia-nscq",)}
    fm_files = tuple(payload["fabricmanager"]) + (version_marker("fabricmanager", driver),)
    nscq_lib = "/usr/lib/x86_64-linux-gnu/libnvidia-nscq.so.%s" % driver
    return [
        Package(fm_name, v, "Fabric Manager for NVSwitch based systems.", source="fabricmanager",
                depends=(driver_dep, "nvidia-sim-runtime"), files=fm_files, **fm_rel),
        Package(nscq_name, v, "NVSwitch Configuration and Query library", source="libnvidia-nscq",
                depends=(driver_dep,), files=(Text(nscq_lib, gen.placeholder("NSCQ library")),), **nscq_rel),
    ]
