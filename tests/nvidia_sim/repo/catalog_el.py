# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated RHEL-family repositories: NVIDIA's rhel9 CUDA repository
(driver packages with NVIDIA's EL names, Epoch 3 and the nvidia-driver module
streams) and the few Rocky Linux 9 BaseOS/AppStream and EPEL packages the
roles install on an EL host.

Facts and sources: docs/reference/platform-package-facts.md, section 2.
Simplifications, each stricter or smaller than NVIDIA's repository:
- one modules.yaml document per stream, listing every release of its branch
  (NVIDIA publishes one document per stream and build);
- streams <branch>-dkms and <branch>-open per branch, latest-dkms and
  open-dkms (the default stream, as in NVIDIA's current rhel9 repository);
  no precompiled <branch> streams (they need Red Hat's kernels);
- cuda-drivers is an artifact of the -dkms streams only and requires the
  proprietary kmod; nvidia-open, of the -open streams, the open one;
- every driver piece requires its siblings at exactly its version.
"""

import hashlib

import catalog_drivers
import generated_files as gen
import maint_scripts as scripts
from catalog_tools import version_marker
from debpkg import Symlink, Text
from rpmpkg import RpmPackage

EPOCH = 3
# Repository groups (RpmPackage.repos) -> directory below the output.
RPM_REPOS = {
    "cuda:rhel9": "compute/cuda/repos/rhel9/x86_64",
    "rocky9:BaseOS": "rocky/9/BaseOS/x86_64/os",
    "rocky9:AppStream": "rocky/9/AppStream/x86_64/os",
    "epel9": "epel/9/Everything/x86_64",
    "container-toolkit:rpm": "libnvidia-container/stable/rpm/x86_64",
}
# Which key signs which repository: NVIDIA's, Rocky's or EPEL's (simulated).
RPM_REPO_KEYS = {"cuda:rhel9": "cuda", "rocky9:BaseOS": "rocky", "rocky9:AppStream": "rocky", "epel9": "epel",
                 "container-toolkit:rpm": "container-toolkit"}
# NVIDIA signs the container toolkit repository's metadata, not its packages.
UNSIGNED_PACKAGES = frozenset(("container-toolkit:rpm",))
MODULE = "nvidia-driver"
# NVIDIA's current rhel9 default stream (issue #63 of yum-packaging-precompiled-kmod).
DEFAULT_STREAM = "open-dkms"
MODULE_VERSION = "20250717195056"


def _eq(name, version):
    return "%s = %d:%s" % (name, EPOCH, version)


def driver(branch, version, dist, payload, open_meta, unversioned_fm=False):
    """The packages of one driver release for one EL major; {stream kind: names} marks which
    belong to the -dkms ("proprietary") and -open ("open") streams besides the common ones."""
    release = "1." + dist
    repos = ("cuda:rhel%s" % dist[2:],)

    def pkg(name, summary, **kwargs):
        kwargs.setdefault("epoch", EPOCH)
        kwargs.setdefault("release", release)
        return RpmPackage(name, version, summary=summary, repos=repos, **kwargs)

    def eq(name):
        return _eq(name, version)

    userland = (eq("nvidia-driver"), eq("nvidia-driver-cuda"), eq("nvidia-settings"), eq("nvidia-xconfig"),
                eq("nvidia-modprobe"), eq("nvidia-persistenced"))
    common = [
        pkg("nvidia-kmod-common", "Common file for NVIDIA's proprietary driver kernel modules", arch="noarch",
            requires=(eq("nvidia-kmod"), "grubby"), files=catalog_drivers.firmware_files(version)),
        pkg("libnvidia-ml", "NVIDIA Management Library (NVML)", files=catalog_drivers.nvml_files(version)),
        pkg("nvidia-driver-cuda-libs", "Libraries for CUDA support of the NVIDIA driver",
            requires=(eq("libnvidia-ml"),)),
        pkg("nvidia-persistenced", "A daemon to maintain persistent software state in the NVIDIA driver",
            requires=(eq("nvidia-driver-cuda-libs"), "nvidia-sim-runtime"),
            files=tuple(payload["persistenced"]), postinst=scripts.persistenced_postinst()),
        pkg("nvidia-driver-cuda", "CUDA integration for the NVIDIA driver (nvidia-smi)",
            requires=(eq("nvidia-driver-cuda-libs"), eq("nvidia-kmod-common"), eq("nvidia-persistenced"),
                      "opencl-filesystem", "ocl-icd", "nvidia-sim-runtime"),
            files=catalog_drivers.utils_files(version, payload),
            postinst=scripts.driver_utils_postinst(version)),
        pkg("nvidia-driver-libs", "Libraries for the NVIDIA driver"),
        pkg("nvidia-driver", "NVIDIA's proprietary display driver for NVIDIA graphic cards",
            requires=(eq("nvidia-driver-libs"), eq("nvidia-kmod-common"))),
        pkg("nvidia-modprobe", "Load the NVIDIA kernel driver and create device files"),
        pkg("nvidia-settings", "Configure the NVIDIA graphics driver"),
        pkg("nvidia-xconfig", "NVIDIA X configuration file editor"),
        pkg("nvidia-libXNVCtrl", "Library providing the NV-CONTROL API"),
    ]
    dkms = {
        "proprietary": pkg("kmod-nvidia-latest-dkms", "NVIDIA display driver kernel module (DKMS)", arch="noarch",
                           requires=(eq("nvidia-kmod-common"), "dkms"), provides=(eq("nvidia-kmod"),),
                           conflicts=("kmod-nvidia-open-dkms",),
                           files=catalog_drivers.kernel_module_files(version, "proprietary"),
                           postinst=scripts.dkms_postinst(version), prerm=scripts.dkms_prerm(version)),
        "open": pkg("kmod-nvidia-open-dkms", "NVIDIA open kernel modules (DKMS)", arch="noarch",
                    requires=(eq("nvidia-kmod-common"), "dkms"), provides=(eq("nvidia-kmod"),),
                    conflicts=("kmod-nvidia-latest-dkms",),
                    files=catalog_drivers.kernel_module_files(version, "open"),
                    postinst=scripts.dkms_postinst(version), prerm=scripts.dkms_prerm(version)),
    }
    streams = {
        "proprietary": [dkms["proprietary"],
                        pkg("cuda-drivers", "CUDA Driver meta-package", epoch=None, release="1",
                            requires=userland + (eq("kmod-nvidia-latest-dkms"),))],
        "open": [dkms["open"]],
    }
    if open_meta:
        streams["open"].append(pkg("nvidia-open", "NVIDIA driver with open kernel modules meta-package",
                                   requires=userland + (eq("kmod-nvidia-open-dkms"),)))
    # Fabric Manager and NSCQ: nvidia-fabric-manager and libnvidia-nscq-<branch>
    # up to 570, nvidia-fabricmanager and libnvidia-nscq from 580 (the names
    # NVIDIA's newer EL installs ask for; facts document, section 2.3). The
    # simulation ties them to the driver release (NVIDIA's carry no such dependency).
    fm_name = "nvidia-fabricmanager" if unversioned_fm else "nvidia-fabric-manager"
    nscq_name = "libnvidia-nscq" if unversioned_fm else "libnvidia-nscq-%s" % branch
    fm = [
        pkg(fm_name, "Fabric Manager for NVSwitch based systems", epoch=None, release="1",
            requires=(eq("nvidia-kmod-common"), "nvidia-sim-runtime"),
            files=tuple(payload["fabricmanager"]) + (version_marker("fabricmanager", version),)),
        pkg(nscq_name, "NVSwitch Configuration and Query library", epoch=None, release="1",
            requires=(eq("nvidia-kmod-common"),),
            files=(Text("/usr/lib64/libnvidia-nscq.so.%s" % version, gen.placeholder("NSCQ library")),)),
    ]
    return common, streams, fm


_DEB_RELATIONS = {"=": "=", ">=": ">=", "<=": "<=", "<<": "<", ">>": ">"}


def _rpm_relation(deb_relation):
    """"name (>= 1.2-1)" -> "name >= 1.2" (rpm compares the release only when asked)."""
    name, _sep, rest = deb_relation.partition(" (")
    if not rest:
        return name.strip()
    operator, version = rest.rstrip(")").split()
    return "%s %s %s" % (name, _DEB_RELATIONS[operator], version.rsplit("-", 1)[0])


def from_deb(package, repos):
    """The rpm twin of a simulated .deb whose upstream packages the same
    files for both (the container toolkit, CUDA, DCGM): same files and
    scripts, same epoch, Depends as Requires; Breaks/Replaces name versions no
    repository carries. A Debian version without a revision ("1:3.3.9", DCGM
    3) becomes release 1."""
    epoch, _sep, full = package.version.rpartition(":")
    upstream, _sep, release = full.rpartition("-") if "-" in full else (full, "", "1")
    return RpmPackage(package.name, upstream, release, package.description, epoch=int(epoch) if epoch else None,
                      arch="noarch" if package.architecture == "all" else "x86_64",
                      requires=tuple(_rpm_relation(d) for d in package.depends),
                      provides=tuple(_rpm_relation(p) for p in package.provides),
                      conflicts=tuple(_rpm_relation(c) for c in package.conflicts),
                      files=package.files, postinst=package.postinst, prerm=package.prerm,
                      postrm=package.postrm, repos=repos)


def sim_runtime(version, payload):
    """The simulator's shared runtime, as an rpm (not an NVIDIA package)."""
    upstream, _sep, release = version.partition("-")
    return RpmPackage("nvidia-sim-runtime", upstream, release or "1",
                      "simulated NVIDIA stack: shared runtime (nvsim, GPU profiles, nvidia-sim-hw)\n"
                      "Not an NVIDIA package: every simulated package that ships a simulated tool requires it.",
                      arch="noarch", files=tuple(payload["sim-runtime"]),
                      repos=("cuda:rhel9", "container-toolkit:rpm"))


def kernel_devel(kernel, dist):
    """kernel-devel of the running kernel (the machine's, shared by every
    container): the headers tree DKMS builds against, as Rocky's AppStream
    has it for each of its kernels. On Rocky, kernel-devel-<uname -r>
    (5.14.0-503.14.1.el9_5.x86_64) parses as name, version, release and
    arch; the machine's kernel release is not shaped like Rocky's, so the
    package is named and versioned the way dnf parses
    kernel-devel-<uname -r> (its last two dashes split version and
    release), which makes "dnf list" and "dnf install" of that name find
    it as they find Rocky's."""
    if "-" in kernel:
        name, version, release = ("kernel-devel-" + kernel).rsplit("-", 2)
    else:
        name, version, release = "kernel-devel", kernel, "1." + dist
    return RpmPackage(
        name, version, release, "Development package for building kernel modules to match the kernel",
        provides=("kernel-devel-uname-r",),
        files=(Text("/usr/src/kernels/%s/Makefile" % kernel,
                    "# simulated kernel-devel tree of %s (gpufleet.nvidia test double)\n" % kernel),
               Symlink("/lib/modules/%s/build" % kernel, "/usr/src/kernels/%s" % kernel)),
        repos=("rocky9:AppStream",))


def base_packages(kernel):
    """What the roles install from Rocky's own repositories and EPEL. The
    programs themselves are the shaped host's Debian userland (dkms, the
    dnf versionlock plugin): these packages carry Rocky's and EPEL's names
    and versions for dnf and rpm to resolve and record."""
    def marker(name, version, release, summary, repo, arch="noarch"):
        return RpmPackage(name, version, release, summary + "\nThe program is the shaped host's Debian userland's.",
                          arch=arch, repos=(repo,))
    return [
        marker("grubby", "8.40", "61.el9", "Command line tool for updating bootloader configs", "rocky9:BaseOS",
               arch="x86_64"),
        marker("python3-dnf-plugin-versionlock", "4.3.0", "16.el9",
               "Version Lock Plugin for DNF", "rocky9:BaseOS"),
        marker("ocl-icd", "2.2.13", "4.el9", "OpenCL Library (Installable Client Library) Bindings",
               "rocky9:AppStream", arch="x86_64"),
        marker("opencl-filesystem", "1.0", "14.el9", "OpenCL filesystem layout", "rocky9:AppStream"),
        marker("dkms", "3.1.5", "1.el9", "Dynamic Kernel Module Support Framework", "epel9"),
        kernel_devel(kernel, "el9"),
    ]


def streams_of(branch_releases):
    """Stream name -> (branch, kind) for branches {branch: [(version, common, streams, fm)]}."""
    result = {}
    branches = sorted(branch_releases, key=int)
    for branch in branches:
        result["%s-dkms" % branch] = (branch, "proprietary")
        result["%s-open" % branch] = (branch, "open")
    result["latest-dkms"] = (branches[-1], "proprietary")
    result["open-dkms"] = (branches[-1], "open")
    return result


def modules_yaml(branch_releases, arch="x86_64"):
    """modules.yaml of the nvidia-driver module: one modulemd document per
    stream and the modulemd-defaults document (shape: NVIDIA's
    genmodules.py, see the facts document)."""
    documents = []
    for stream, (branch, kind) in sorted(streams_of(branch_releases).items()):
        packages = []
        for _version, common, streams, fm in branch_releases[branch]:
            packages += common + streams[kind] + fm
        artifacts = sorted({p.nevra for p in packages})
        names = sorted({p.name for p in packages})
        fm_names = sorted({p.name for _v, _c, _s, fm in branch_releases[branch] for p in fm})
        default = [n for n in names if n not in fm_names]
        newest = branch_releases[branch][-1][0]
        profiles = {
            "default": ("Default installation", default),
            "fm": ("FabricManager installation", names),
            "ks": ("Installation via kickstart", [n for n in default if n != "cuda-drivers"]),
        }
        lines = ["---", "document: modulemd", "version: 2", "data:",
                 "    name: %s" % MODULE, "    stream: %s" % stream, "    version: %s" % MODULE_VERSION,
                 "    context: %s" % _context(stream),
                 "    arch: %s" % arch, "    summary: Nvidia driver for %s branch" % stream,
                 "    description: >-", "        This package provides the most recent NVIDIA display driver.",
                 "        For the full product support list, please consult the release notes for",
                 "        driver version %s (simulated repository, gpufleet.nvidia test double)." % newest,
                 "    license:", "        module:", "            - MIT",
                 "    profiles:"]
        for profile, (description, rpms) in profiles.items():
            lines += ["        %s:" % profile, "            description: %s" % description, "            rpms:"]
            lines += ["                - %s" % n for n in rpms]
        lines += ["    artifacts:", "        rpms:"] + ["            - %s" % a for a in artifacts]
        lines.append("...")
        documents.append("\n".join(lines))
    defaults = ["---", "document: modulemd-defaults", "version: 1", "data:", "    module: %s" % MODULE,
                "    stream: %s" % DEFAULT_STREAM, "    profiles:"]
    defaults += ["        %s: [default]" % stream for stream in sorted(streams_of(branch_releases))]
    defaults.append("...")
    documents.append("\n".join(defaults))
    return "\n".join(documents) + "\n"


def _context(stream):
    # genmodules.py: md5 of name, stream, version and distro, 10 characters.
    return hashlib.md5((MODULE + stream + MODULE_VERSION + "el9").encode()).hexdigest()[:10]
