# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Packages of the simulated Canonical (Ubuntu) archive: Canonical's build of
NVIDIA's server branches (source nvidia-graphics-drivers-<branch>-server), a
kernel and the prebuilt, Canonical-signed modules (linux-restricted-modules).

Names, versions and relations follow Canonical's debian/control
(docs/reference/platform-package-facts.md, section 1); the payload is the
simulator's, as in the NVIDIA repositories.  Relations on packages of the
distribution itself are left out except dkms, adduser and
ocl-icd-libopencl1, which a host finds in its own archive.
"""

import generated_files as gen
import maint_scripts as scripts
from catalog_drivers import firmware_files, kernel_module_files, nvml_files, utils_files
from debpkg import Package, Text

SIM = "nvidia-sim-runtime"


def sru_version(driver, release):
    """A stable release update's version: 570.195.03-0ubuntu0.24.04.1.

    Always the first upload (.1), a simplification: Canonical's first
    570.195.03 and 580.95.05 uploads were .2, and their LP #2129682 packaging
    (exact_virtual below) came with .3.
    """
    return "%s-0ubuntu0.%s.1" % (driver, release)


def _prc(*names):
    """Provides, Conflicts and Replaces on the same names (Ubuntu's idiom for
    one provider of a name per host)."""
    return {"provides": names, "conflicts": names, "replaces": names}


def _upstream_range(name, driver):
    # Written literally in Canonical's control: any Debian revision of this
    # upstream version ("<= V-1" admits V-0ubuntu0.24.04.1).
    return ("%s (<= %s-1)" % (name, driver), "%s (>= %s)" % (name, driver))


def kernel_common_tie(branch, driver, exact_virtual):
    """What ties a package to one nvidia-kernel-common-<branch>-server version."""
    common = "nvidia-kernel-common-%s-server" % branch
    if exact_virtual:
        return ("%s-%s" % (common, driver),)
    return _upstream_range(common, driver)


def server_driver(branch, driver, release, repos, payload, exact_virtual, opencl_loader):
    """nvidia-graphics-drivers-<branch>-server for one Ubuntu release.

    exact_virtual: the packaging of LP #2129682 (570 and 580 from their
    570.195.03 and 580.95.05 uploads on; never 535): kernel-common provides
    nvidia-kernel-common-<branch>-server-<driver> and the libraries and
    nvidia-utils depend on it; libnvidia-compute also provides libcuda1 and
    libnvidia-ml1.  opencl_loader: libnvidia-compute depends on
    ocl-icd-libopencl1 (580).
    """
    b = "%s-server" % branch
    v = sru_version(driver, release)
    source = "nvidia-graphics-drivers-%s" % b

    def pkg(name, description, section="restricted/libs", **kwargs):
        return Package(name, v, description, section=section, source=source, repos=repos, **kwargs)

    def eq(name):
        return "%s (= %s)" % (name, v)

    tie = kernel_common_tie(branch, driver, exact_virtual) if exact_virtual else ()
    common = "nvidia-kernel-common-%s" % b
    firmware = "nvidia-firmware-%s-%s" % (b, driver)
    compute = "libnvidia-compute-%s" % b
    compute_provides = ("libnvidia-compute", "libnvidia-ml.so.1 (= %s)" % v)
    if exact_virtual:
        compute_provides += ("libnvidia-ml1 (= %s)" % v, "libcuda1 (= %s)" % v)
    compute_provides += ("libcuda.so.1 (= %s)" % v,)
    packages = [
        # The non-server branch installs the same firmware files.
        pkg(firmware, "NVIDIA GSP firmware", files=firmware_files(driver),
            breaks=("nvidia-firmware-%s-%s" % (branch, driver),),
            replaces=("nvidia-firmware-%s-%s" % (branch, driver),)),
        pkg(common, "Shared files used by the kernel modules", depends=(firmware,),
            provides=("nvidia-kernel-common",) + (("%s-%s" % (common, driver),) if exact_virtual else ()),
            conflicts=("nvidia-kernel-common",), replaces=("nvidia-kernel-common",)),
        pkg(compute, "NVIDIA libcompute package", files=nvml_files(driver),
            depends=tie + (("ocl-icd-libopencl1",) if opencl_loader else ()),
            provides=compute_provides, conflicts=("libnvidia-compute",), replaces=("libnvidia-compute",)),
        pkg("libnvidia-cfg1-%s" % b, "NVIDIA binary OpenGL/GLX configuration library", depends=tie,
            **_prc("libnvidia-cfg1-any")),
        # No dependency on the NVML library, as Canonical's: nvidia-smi alone
        # cannot load libnvidia-ml.so.1.
        pkg("nvidia-utils-%s" % b, "NVIDIA driver support binaries", depends=tie + (SIM,),
            files=utils_files(driver, payload), postinst=scripts.driver_utils_postinst(driver),
            **_prc("nvidia-utils", "nvidia-smi")),
        pkg("nvidia-compute-utils-%s" % b, "NVIDIA compute utilities", depends=(compute, "adduser", SIM),
            files=tuple(payload["persistenced"]), postinst=scripts.persistenced_postinst(),
            **_prc("nvidia-compute-utils", "nvidia-persistenced")),
        # The graphics stack: empty, the simulation has no display.
        pkg("libnvidia-common-%s" % b, "Shared files used by the NVIDIA libraries", architecture="all",
            depends=tie, **_prc("libnvidia-common")),
        pkg("libnvidia-gl-%s" % b, "NVIDIA OpenGL/GLX/EGL/GLES GLVND libraries and Vulkan ICD",
            depends=tie + ("libnvidia-common-%s" % b,), provides=("libnvidia-gl", "libglx-vendor", "libegl-vendor"),
            conflicts=("libnvidia-gl",), replaces=("libnvidia-gl",)),
        pkg("libnvidia-extra-%s" % b, "Extra libraries for the NVIDIA driver", depends=tie,
            **_prc("libnvidia-extra")),
        pkg("libnvidia-decode-%s" % b, "NVIDIA Video Decoding runtime libraries", depends=tie + (eq(compute),),
            **_prc("libnvidia-decode")),
        pkg("libnvidia-encode-%s" % b, "NVENC Video Encoding runtime library", depends=tie,
            **_prc("libnvidia-encode")),
        pkg("libnvidia-fbc1-%s" % b, "NVIDIA OpenGL-based Framebuffer Capture runtime library", depends=tie,
            **_prc("libnvidia-fbc1")),
        pkg("xserver-xorg-video-nvidia-%s" % b, "NVIDIA binary Xorg driver", section="restricted/x11",
            depends=(eq("libnvidia-cfg1-%s" % b),), **_prc("xorg-driver-binary", "nvidia-driver-binary")),
    ]
    for suffix, flavour in (("", "proprietary"), ("-open", "open")):
        kernel_source = "nvidia-kernel-source-%s%s" % (b, suffix)
        dkms = "nvidia-dkms-%s%s" % (b, suffix)
        no_dkms = "nvidia-headless-no-dkms-%s%s" % (b, suffix)
        # The open flavour gets the firmware through kernel-common only.
        firmware_dep = (firmware,) if flavour == "proprietary" else ()
        packages += [
            pkg(kernel_source, "NVIDIA kernel source package%s" % (" (open kernel module)" if suffix else ""),
                **_prc("nvidia-kernel-source")),
            pkg(dkms, "NVIDIA DKMS package%s" % (" (open kernel module)" if suffix else ""),
                depends=("dkms",) + _upstream_range(kernel_source, driver) + _upstream_range(common, driver)
                + firmware_dep,
                files=kernel_module_files(driver, flavour),
                postinst=scripts.dkms_postinst(driver), prerm=scripts.dkms_prerm(driver),
                **_prc("nvidia-dkms-kernel")),
            pkg(no_dkms, "NVIDIA headless metapackage - no DKMS",
                depends=_upstream_range(common, driver)
                + (eq(kernel_source), eq(compute), eq("nvidia-compute-utils-%s" % b), eq("libnvidia-cfg1-%s" % b))),
            pkg("nvidia-headless-%s%s" % (b, suffix), "NVIDIA headless metapackage",
                depends=(no_dkms, dkms), **_prc("nvidia-headless")),
            pkg("nvidia-driver-%s%s" % (b, suffix), "NVIDIA driver metapackage",
                depends=(eq("libnvidia-gl-%s" % b),) + _upstream_range(dkms, driver)
                + _upstream_range(common, driver)
                + tuple(eq(n) for n in (kernel_source, compute, "libnvidia-extra-%s" % b,
                                        "nvidia-compute-utils-%s" % b, "libnvidia-decode-%s" % b,
                                        "libnvidia-encode-%s" % b, "nvidia-utils-%s" % b,
                                        "xserver-xorg-video-nvidia-%s" % b, "libnvidia-cfg1-%s" % b,
                                        "libnvidia-fbc1-%s" % b))),
        ]
    return packages


def kernel(abi, version, repos):
    """A kernel of one ABI and its metas.  Placeholders only: no maintainer
    script (the real ones run depmod, update-initramfs and the bootloader),
    and the container keeps running the machine's kernel."""

    def pkg(name, description, section="kernel", **kwargs):
        return Package(name, version, description, section=section, repos=repos, **kwargs)

    image, headers = "linux-image-%s" % abi, "linux-headers-%s" % abi
    return [
        pkg(image, "Signed kernel image generic (simulated)", source="linux-signed",
            files=(Text("/boot/vmlinuz-%s" % abi, gen.placeholder("Linux kernel image " + abi)),
                   # What DKMS and depmod find; empty: the simulation has no in-tree modules.
                   Text("/lib/modules/%s/modules.dep" % abi, ""))),
        pkg(headers, "Linux kernel headers for version %s (simulated)" % abi, section="devel", source="linux",
            files=(Text("/usr/src/%s/Makefile" % headers, "# " + gen.placeholder("kernel headers " + abi)),)),
        pkg("linux-image-generic", "Generic Linux kernel image", source="linux-meta", depends=(image,)),
        pkg("linux-headers-generic", "Generic Linux kernel headers", source="linux-meta", depends=(headers,)),
        pkg("linux-generic", "Complete Generic Linux kernel and headers", source="linux-meta",
            depends=("linux-image-generic (= %s)" % version, "linux-headers-generic (= %s)" % version)),
    ]


def prebuilt_modules(branch, driver, abi, kernel_version, exact_virtual, repos):
    """linux-restricted-modules of one branch for one kernel: per flavour the
    ABI package (the modules) and the kernel flavour's meta package."""
    subdir = "nvidia-%ssrv" % branch
    # Meta and ABI package come from one source upload and share its version.
    v = kernel_version + "+1"
    packages = []
    for suffix, flavour, other in (("", "proprietary", "-open"), ("-open", "open", "")):
        name = "linux-modules-nvidia-%s-server%s-%s" % (branch, suffix, abi)
        files = tuple(
            Text("/lib/modules/%s/kernel/%s/%s.ko" % (abi, subdir, module),
                 "simulated kernel module %s %s for %s (%s, prebuilt by linux-restricted-modules)\n"
                 % (module, driver, abi, flavour))
            for module in gen.KERNEL_MODULES)
        # Not kernel-module-flavour, which the DKMS packages ship: both may be installed.
        files += (Text("/usr/share/nvidia-sim/prebuilt-kernel-module-flavour/%s" % abi, flavour + "\n"),)
        packages += [
            Package(name, v, "Linux kernel nvidia modules for version %s" % abi, section="restricted/kernel",
                    source="linux-restricted-modules", repos=repos,
                    # The exact tie to one kernel-common version is the
                    # simulation's stricter choice (unverified: Canonical's
                    # full Depends line is not in the sources).
                    depends=("linux-image-%s | linux-image-unsigned-%s" % (abi, abi),)
                    + kernel_common_tie(branch, driver, exact_virtual),
                    # Both flavours install the same module paths.
                    conflicts=("linux-modules-nvidia-%s-server%s-%s" % (branch, other, abi),),
                    files=files,
                    postinst=scripts.prebuilt_modules_postinst(abi, subdir, gen.KERNEL_MODULES),
                    postrm=scripts.prebuilt_modules_postrm(abi, subdir)),
            Package("linux-modules-nvidia-%s-server%s-generic" % (branch, suffix), v,
                    "Extra drivers for nvidia-%s-server%s for the generic flavour" % (branch, suffix),
                    section="restricted/kernel", source="linux-restricted-modules", repos=repos,
                    depends=("%s (= %s)" % (name, v), "nvidia-kernel-common-%s-server (>= %s)" % (branch, driver))),
        ]
    return packages
