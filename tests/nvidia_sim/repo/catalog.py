# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the simulated NVIDIA repositories and the simulated Canonical archive
contain: versions, repository layout and the only mapping of simulator payload
files to packages.

Package names, version schemes and dependency shapes are NVIDIA's, and
Canonical's in the archive (see the "Repository" section of
tests/nvidia_sim/README.md for sources and for the few places where the
simulation is deliberately stricter).
"""

import os

import catalog_canonical
import catalog_cuda
import catalog_drivers
import catalog_el
import catalog_tools
from debpkg import Payload, PayloadTree

# Repository directories below the output directory, mirroring NVIDIA's URLs.
CUDA_DISTROS = catalog_drivers.DEBIAN_DISTROS + catalog_drivers.UBUNTU_DISTROS
CUDA_REPO_DIR = "compute/cuda/repos/%s/x86_64"
CONTAINER_TOOLKIT_DIR = "libnvidia-container/stable/deb/amd64"

# A signed copy of each CUDA repository as it was before NVIDIA published the
# newest release of every driver branch that has two: what a mirror served at
# the last converge, before it gained a release. The fault suite serves it,
# then the full directory at the same URL (molecule/faults, "the mirror gains
# a release"). Its index is dated SNAPSHOT_AGE seconds before the build, as a
# mirror's older copy is: apt asks for a newer one (If-Modified-Since).
SNAPSHOT_ROOT = "snapshots/before-newest-drivers"
SNAPSHOT_DIR = SNAPSHOT_ROOT + "/" + CUDA_REPO_DIR
SNAPSHOT_AGE = 2 * 3600

# Driver branch -> versions, oldest first; two versions allow in-branch upgrades.
DRIVER_BRANCHES = {
    "535": ("535.261.03",),
    "550": ("550.163.01",),
    "570": ("570.172.08", "570.195.03"),
    "580": ("580.82.07", "580.95.05"),
}
NVIDIA_OPEN_META_FROM_BRANCH = 560       # nvidia-open exists from 560 on
UNVERSIONED_FABRIC_MANAGER_FROM_BRANCH = 580

CUDA_RELEASES = (
    {"release": "12.4", "toolkit": "12.4.1", "cudart": "12.4.127", "nvcc": "12.4.131", "year": "2024",
     "nvcc_built_on": "Thu_Mar_28_02:18:24_PDT_2024", "nvcc_build": "34097967", "compat_driver": "550.54.15"},
    {"release": "12.8", "toolkit": "12.8.1", "cudart": "12.8.90", "nvcc": "12.8.93", "year": "2025",
     "nvcc_built_on": "Fri_Feb_21_20:23:50_PST_2025", "nvcc_build": "35583870", "compat_driver": "570.124.06"},
    {"release": "13.0", "toolkit": "13.0.1", "cudart": "13.0.96", "nvcc": "13.0.88", "year": "2025",
     "nvcc_built_on": "Wed_Aug_20_01:58:59_PM_PDT_2025", "nvcc_build": "36424714", "compat_driver": "580.82.07"},
)
# cuDNN version -> CUDA majors it is built for (9.13 is the first with CUDA 13).
CUDNN_RELEASES = {"9.10.2.21": ("12",), "9.13.0.50": ("12", "13")}

CONTAINER_TOOLKIT_VERSIONS = ("1.17.7", "1.17.8", "1.18.0", "1.18.2")
CDI_REFRESH_FROM = (1, 18)
DCGM4_VERSIONS = ("4.2.3", "4.4.1")
DCGM3_VERSION = "3.3.9"
DCGM_EXPORTER_VERSION = "4.1.3"
DCGM_EXPORTER_MIN_DCGM = "1:4.0.0"
CUDA_KEYRING_VERSION = "1.1-1"
SIM_RUNTIME_VERSION = "1.0-1"

# The simulated Canonical archive below UBUNTU_DIR: Ubuntu's layout
# (dists/<suite>/<component>/binary-amd64, pool/), every suite and component
# of a host's ubuntu.sources, most of them empty.  Simplification: everything
# is in <codename>-updates (the real archive also has the release pocket's
# older kernel and drivers, and security copies).
UBUNTU_DIR = "ubuntu"
UBUNTU_RELEASES = {"jammy": "22.04", "noble": "24.04"}
UBUNTU_POCKETS = ("", "-updates", "-security", "-backports")
UBUNTU_COMPONENTS = ("main", "restricted", "universe", "multiverse")
# Canonical's server branches, one release each: the newest of the branch
# in DRIVER_BRANCHES.
CANONICAL_SERVER_BRANCHES = ("535", "570", "580")
# LP #2129682: kernel-common provides nvidia-kernel-common-<branch>-server-<version>
# and the userland depends on it (570 and 580; 535-server never had it).
CANONICAL_EXACT_COMMON_FROM_BRANCH = 570
CANONICAL_OPENCL_LOADER_FROM_BRANCH = 580
# Codename -> (ABI, version) of its kernel (generic flavour).
UBUNTU_KERNELS = {"jammy": ("5.15.0-127-generic", "5.15.0-127.137"),
                  "noble": ("6.8.0-60-generic", "6.8.0-60.63")}

UNIT_DIR = "/lib/systemd/system"
EXECUTABLE = 0o755

# Simulator payload (paths relative to tests/nvidia_sim) -> installed path.
PAYLOAD = {
    "sim-runtime": (
        # One tree per package directory: a new subpackage must be listed here
        # (tests/unit/simulator/test_layout.py checks that every module ships).
        PayloadTree("nvsim", "/usr/lib/nvidia-sim/nvsim", "*.py"),
        PayloadTree("nvsim/smi", "/usr/lib/nvidia-sim/nvsim/smi", "*.py"),
        PayloadTree("nvsim/ctk", "/usr/lib/nvidia-sim/nvsim/ctk", "*.py"),
        PayloadTree("nvsim/dcgm", "/usr/lib/nvidia-sim/nvsim/dcgm", "*.py"),
        PayloadTree("profiles", "/usr/share/nvidia-sim/profiles", "*.json"),
        Payload("bin/nvidia-sim-hw", "/usr/bin/nvidia-sim-hw", EXECUTABLE),
    ),
    # Shipped by the package that ships nvidia-smi (nvidia-smi / nvidia-utils-<branch>).
    "driver-utils": (
        Payload("bin/nvidia-smi", "/usr/bin/nvidia-smi", EXECUTABLE),
        Payload("bin/nvidia-sim-workload", "/usr/bin/nvidia-sim-workload", EXECUTABLE),
        Payload("bin/nvidia-sim-modload", "/usr/bin/nvidia-sim-modload", EXECUTABLE),
        Payload("systemd/nvidia-sim-modload.service", UNIT_DIR + "/nvidia-sim-modload.service"),
    ),
    "persistenced": (
        Payload("bin/nvidia-persistenced", "/usr/bin/nvidia-persistenced", EXECUTABLE),
        Payload("systemd/nvidia-persistenced.service", UNIT_DIR + "/nvidia-persistenced.service"),
    ),
    "fabricmanager": (
        Payload("bin/nv-fabricmanager", "/usr/bin/nv-fabricmanager", EXECUTABLE),
        Payload("systemd/nvidia-fabricmanager.service", UNIT_DIR + "/nvidia-fabricmanager.service"),
        # A conffile outside /etc in NVIDIA's package (debian/conffiles).
        Payload("data/fabricmanager.cfg", "/usr/share/nvidia/nvswitch/fabricmanager.cfg", conffile=True),
    ),
    "dcgm": (
        Payload("bin/nv-hostengine", "/usr/bin/nv-hostengine", EXECUTABLE),
        Payload("bin/dcgmi", "/usr/bin/dcgmi", EXECUTABLE),
        Payload("systemd/nvidia-dcgm.service", UNIT_DIR + "/nvidia-dcgm.service"),
    ),
    "dcgm-exporter": (
        Payload("bin/dcgm-exporter", "/usr/bin/dcgm-exporter", EXECUTABLE),
        Payload("systemd/nvidia-dcgm-exporter.service", UNIT_DIR + "/nvidia-dcgm-exporter.service"),
        Payload("data/default-counters.csv", "/etc/dcgm-exporter/default-counters.csv"),
    ),
    "nvidia-ctk": (
        Payload("bin/nvidia-ctk", "/usr/bin/nvidia-ctk", EXECUTABLE),
    ),
    # NVIDIA's deb installs these two units below /etc/systemd/system.
    "cdi-refresh": (
        Payload("systemd/nvidia-cdi-refresh.path", "/etc/systemd/system/nvidia-cdi-refresh.path"),
        Payload("systemd/nvidia-cdi-refresh.service", "/etc/systemd/system/nvidia-cdi-refresh.service"),
        Payload("data/nvidia-cdi-refresh.env", "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"),
    ),
}


def _version_tuple(version):
    return tuple(int(p) for p in version.split("."))


def driver_packages():
    packages = []
    for branch, versions in sorted(DRIVER_BRANCHES.items()):
        branch_packages = []
        for driver in versions:
            built = catalog_drivers.debian_pieces(driver, PAYLOAD)
            built += catalog_drivers.debian_metas(branch, driver, int(branch) >= NVIDIA_OPEN_META_FROM_BRANCH)
            built += catalog_drivers.ubuntu_tree(branch, driver, PAYLOAD)
            built += catalog_drivers.ubuntu_metas(branch, driver, int(branch) >= NVIDIA_OPEN_META_FROM_BRANCH)
            built += catalog_drivers.fabric_manager(
                branch, driver, int(branch) >= UNVERSIONED_FABRIC_MANAGER_FROM_BRANCH, PAYLOAD)
            packages += built
            packages.append(catalog_drivers.pinning(
                "nvidia-driver-pinning-%s" % driver, driver + catalog_drivers.REVISION, driver + "-*",
                "driver version %s" % driver, {p.name for p in built}))
            branch_packages += built
        packages.append(catalog_drivers.pinning(
            "nvidia-driver-pinning-%s" % branch, branch + catalog_drivers.REVISION, branch + ".*",
            "driver branch %s" % branch, {p.name for p in branch_packages}))
    return packages


def cuda_packages():
    packages = catalog_cuda.config_commons(CUDA_RELEASES)
    for release in CUDA_RELEASES:
        packages += catalog_cuda.toolkit(release)
        packages.append(catalog_cuda.compat(release))
    majors = sorted({m for ms in CUDNN_RELEASES.values() for m in ms})
    for version, cuda_majors in sorted(CUDNN_RELEASES.items()):
        for major in cuda_majors:
            packages += catalog_cuda.cudnn(version, major, majors)
    return packages


def tool_packages():
    # The Ubuntu archive carries it too (universe; the simulator's, not
    # Ubuntu's): a host then needs no NVIDIA repository for Canonical's driver.
    ubuntu = tuple(ubuntu_group(codename + "-updates", "universe") for codename in sorted(UBUNTU_RELEASES))
    packages = [catalog_tools.sim_runtime(SIM_RUNTIME_VERSION, PAYLOAD, ubuntu)]
    for version in CONTAINER_TOOLKIT_VERSIONS:
        refresh = _version_tuple(version)[:2] >= CDI_REFRESH_FROM
        packages += catalog_tools.container_toolkit(version, refresh, PAYLOAD)
    for version in DCGM4_VERSIONS:
        packages += catalog_tools.dcgm4(version, PAYLOAD)
    packages.append(catalog_tools.dcgm3(DCGM3_VERSION, PAYLOAD))
    packages.append(catalog_tools.dcgm_exporter(DCGM_EXPORTER_VERSION, DCGM_EXPORTER_MIN_DCGM, PAYLOAD))
    return packages


def packages():
    """Every package of the NVIDIA repositories except cuda-keyring (which
    needs the build's key)."""
    return driver_packages() + cuda_packages() + tool_packages()


def ubuntu_group(suite, component):
    return "ubuntu:%s/%s" % (suite, component)


def ubuntu_suites():
    """Codename -> its suites, release pocket first."""
    return {codename: [codename + pocket for pocket in UBUNTU_POCKETS] for codename in sorted(UBUNTU_RELEASES)}


def canonical_packages():
    """The Canonical archive's own packages (nvidia-sim-runtime is in tool_packages)."""
    packages = []
    for codename, release in sorted(UBUNTU_RELEASES.items()):
        suite = codename + "-updates"
        abi, kernel_version = UBUNTU_KERNELS[codename]
        packages += catalog_canonical.kernel(abi, kernel_version, (ubuntu_group(suite, "main"),))
        restricted = (ubuntu_group(suite, "restricted"),)
        for branch in CANONICAL_SERVER_BRANCHES:
            driver = DRIVER_BRANCHES[branch][-1]
            exact = int(branch) >= CANONICAL_EXACT_COMMON_FROM_BRANCH
            packages += catalog_canonical.server_driver(
                branch, driver, release, restricted, PAYLOAD, exact,
                int(branch) >= CANONICAL_OPENCL_LOADER_FROM_BRANCH)
            packages += catalog_canonical.prebuilt_modules(branch, driver, abi, kernel_version, exact, restricted)
    return packages


def all_packages():
    """What a build publishes, but cuda-keyring."""
    return packages() + canonical_packages()


# Driver branches of NVIDIA's rhel9 repository (with the nvidia-driver module streams).
EL_DRIVER_BRANCHES = ("535", "550", "570", "580")


def el_branch_releases(payload):
    """{branch: [(version, common, streams, fm)]} of the rhel9 repository, oldest release first."""
    releases = {}
    for branch in EL_DRIVER_BRANCHES:
        for driver in DRIVER_BRANCHES[branch]:
            common, streams, fm = catalog_el.driver(branch, driver, "el9", payload,
                                                    int(branch) >= NVIDIA_OPEN_META_FROM_BRANCH,
                                                    int(branch) >= UNVERSIONED_FABRIC_MANAGER_FROM_BRANCH)
            releases.setdefault(branch, []).append((driver, common, streams, fm))
    return releases


def running_kernel():
    """The kernel every container runs (the machine's): Rocky's AppStream
    offers kernel-devel for it, as the real one does for its kernels."""
    return os.uname().release


def rpm_packages(kernel=None):
    """Every package of the simulated RPM repositories."""
    packages = [catalog_el.sim_runtime(SIM_RUNTIME_VERSION, PAYLOAD)]
    for releases in el_branch_releases(PAYLOAD).values():
        for _version, common, streams, fm in releases:
            packages += common + [p for kind in sorted(streams) for p in streams[kind]] + fm
    for version in CONTAINER_TOOLKIT_VERSIONS:
        refresh = _version_tuple(version)[:2] >= CDI_REFRESH_FROM
        packages += [catalog_el.from_deb(p, ("container-toolkit:rpm",))
                     for p in catalog_tools.container_toolkit(version, refresh, PAYLOAD)]
    packages += [catalog_el.from_deb(p, ("cuda:rhel9",)) for p in el_cuda_twins()]
    return packages + catalog_el.base_packages(kernel or running_kernel())


def el_cuda_twins():
    """The toolkits, cuDNN and DCGM of the rhel9 repository, as the .debs
    they twin: NVIDIA's EL names differ only in the development packages'
    infix ("devel"), and cuDNN's files sit where EL keeps them."""
    packages = catalog_cuda.config_commons(CUDA_RELEASES)
    for release in CUDA_RELEASES:
        packages += catalog_cuda.toolkit(release, dev="devel")
        packages.append(catalog_cuda.compat(release))
    majors = sorted({m for ms in CUDNN_RELEASES.values() for m in ms})
    for version, cuda_majors in sorted(CUDNN_RELEASES.items()):
        for major in cuda_majors:
            packages += catalog_cuda.cudnn(version, major, majors, dev="devel", libdir="/usr/lib64",
                                           includedir="/usr/include", alternatives="alternatives")
    for version in DCGM4_VERSIONS:
        packages += catalog_tools.dcgm4(version, PAYLOAD)
    packages.append(catalog_tools.dcgm3(DCGM3_VERSION, PAYLOAD))
    packages.append(catalog_tools.dcgm_exporter(DCGM_EXPORTER_VERSION, DCGM_EXPORTER_MIN_DCGM, PAYLOAD))
    return packages


def keyring_packages(keyring, keyid, year, base_url):
    return [catalog_tools.cuda_keyring(distro, CUDA_KEYRING_VERSION, keyring, keyid, year,
                                       "%s/%s/" % (base_url.rstrip("/"), CUDA_REPO_DIR % distro))
            for distro in CUDA_DISTROS]


def newest_driver_releases():
    """The release each snapshot leaves out: the newest of every branch that has two."""
    return tuple(sorted(versions[-1] for versions in DRIVER_BRANCHES.values() if len(versions) > 1))


def snapshot_dirs(package, group):
    """The snapshot directories that carry package of repository group (none for the newest releases)."""
    upstream = package.version.split(":")[-1].rsplit("-", 1)[0]
    if upstream in newest_driver_releases():
        return []
    if group == "cuda":
        return [SNAPSHOT_DIR % d for d in CUDA_DISTROS]
    if group.startswith("cuda:"):
        return [SNAPSHOT_DIR % group.split(":", 1)[1]]
    return []


def repository_dirs():
    """Repository group -> relative directories carrying it."""
    dirs = {"cuda": [CUDA_REPO_DIR % d for d in CUDA_DISTROS], "container-toolkit": [CONTAINER_TOOLKIT_DIR]}
    for distro in CUDA_DISTROS:
        dirs["cuda:%s" % distro] = [CUDA_REPO_DIR % distro]
    return dirs
