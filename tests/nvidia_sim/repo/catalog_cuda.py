# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA toolkit, forward-compatibility and cuDNN 9 packages.

The toolkit metas depend on no driver package, like NVIDIA's
``cuda-toolkit-X-Y``.  Nothing here creates ``/usr/local/cuda`` or
alternatives for it: choosing the default toolkit is the role's job.
"""

import generated_files as gen
import maint_scripts as scripts
from debpkg import Package, Symlink, Text

REVISION = "-1"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
INCLUDEDIR = "/usr/include/x86_64-linux-gnu"


def _names(release):
    major, minor = release["release"].split(".")
    return major, "%s-%s" % (major, minor), "/usr/local/cuda-%s.%s" % (major, minor)


def config_commons(releases):
    """cuda-toolkit-config-common and cuda-toolkit-<major>-config-common, one
    version per release (the runtime of each release depends on them)."""
    packages = []
    for release in releases:
        major = _names(release)[0]
        v = release["cudart"] + REVISION
        packages.append(Package(
            "cuda-toolkit-config-common", v, "Common config package for CUDA Toolkit.", architecture="all",
            files=(Text("/etc/ld.so.conf.d/000_cuda.conf", gen.ld_so_conf("/usr/local/cuda/targets/x86_64-linux/lib")),)))
        packages.append(Package(
            "cuda-toolkit-%s-config-common" % major, v, "Common config package for CUDA Toolkit %s." % major,
            architecture="all",
            files=(Text("/etc/ld.so.conf.d/988_cuda-%s.conf" % major,
                        gen.ld_so_conf("/usr/local/cuda-%s/targets/x86_64-linux/lib" % major)),)))
    return packages


def toolkit(release, dev="dev"):
    """One toolkit release; dev is the development packages' infix: "dev" in
    the Debian and Ubuntu repositories, "devel" in the EL ones
    (cuda-cudart-devel-12-8, cuda-libraries-devel-12-8)."""
    major, xy, prefix = _names(release)
    meta = release["toolkit"] + REVISION
    cudart = release["cudart"] + REVISION
    nvcc = release["nvcc"] + REVISION
    lib = prefix + "/targets/x86_64-linux/lib"
    include = prefix + "/targets/x86_64-linux/include"
    runtime_lib = "libcudart.so.%s" % release["cudart"]
    configs = ("cuda-toolkit-%s-config-common" % xy, "cuda-toolkit-%s-config-common" % major,
               "cuda-toolkit-config-common")
    return [
        Package("cuda-toolkit-%s-config-common" % xy, cudart, "Common config package for CUDA Toolkit %s."
                % release["release"], architecture="all",
                files=(Text(prefix + "/version.json", gen.cuda_version_json(release)),)),
        Package("cuda-cudart-%s" % xy, cudart, "CUDA Runtime native Libraries", depends=configs,
                files=(Text(lib + "/" + runtime_lib, gen.placeholder("CUDA runtime " + release["cudart"])),
                       Symlink(lib + "/libcudart.so.%s" % major, runtime_lib),
                       Symlink(prefix + "/lib64", "targets/x86_64-linux/lib"))),
        Package("cuda-cudart-%s-%s" % (dev, xy), cudart, "CUDA Runtime native dev links, headers",
                depends=("cuda-cudart-%s" % xy,),
                files=(Text(include + "/cuda_runtime_api.h", gen.cuda_runtime_api_h(release)),
                       Symlink(lib + "/libcudart.so", "libcudart.so.%s" % major),
                       Symlink(prefix + "/include", "targets/x86_64-linux/include"))),
        Package("cuda-nvcc-%s" % xy, nvcc, "CUDA nvcc", depends=("cuda-cudart-%s-%s" % (dev, xy),),
                files=(Text(prefix + "/bin/nvcc", gen.nvcc_script(release), 0o755),)),
        Package("cuda-compiler-%s" % xy, meta, "CUDA compiler",
                depends=("cuda-nvcc-%s (>= %s)" % (xy, release["nvcc"]),)),
        Package("cuda-libraries-%s" % xy, meta, "CUDA Libraries %s meta-package" % release["release"],
                depends=("cuda-cudart-%s (>= %s)" % (xy, release["cudart"]),)),
        Package("cuda-libraries-%s-%s" % (dev, xy), meta, "CUDA Libraries %s development meta-package" % release["release"],
                depends=("cuda-cudart-%s-%s (>= %s)" % (dev, xy, release["cudart"]),)),
        Package("cuda-toolkit-%s" % xy, meta, "CUDA Toolkit %s meta-package" % release["release"],
                depends=("cuda-compiler-%s (>= %s)" % (xy, release["toolkit"]),
                         "cuda-libraries-%s (>= %s)" % (xy, release["toolkit"]),
                         "cuda-libraries-%s-%s (>= %s)" % (dev, xy, release["toolkit"])) + configs),
    ]


def compat(release):
    """cuda-compat-X-Y, versioned by the driver it carries (<driver>-1)."""
    xy, prefix = _names(release)[1:]
    driver = release["compat_driver"]
    base = prefix + "/compat"
    return Package(
        "cuda-compat-%s" % xy, driver + REVISION, "CUDA Compatibility Platform",
        files=(Text(base + "/libcuda.so.%s" % driver, gen.placeholder("CUDA driver library " + driver)),
               Symlink(base + "/libcuda.so.1", "libcuda.so.%s" % driver),
               Symlink(base + "/libcuda.so", "libcuda.so.1"),
               Text(base + "/libnvidia-ptxjitcompiler.so.%s" % driver, gen.placeholder("PTX JIT compiler " + driver))))


def cudnn(version, cuda_major, all_majors, dev="dev", libdir=LIBDIR, includedir=INCLUDEDIR,
          alternatives="update-alternatives"):
    """cuDNN 9 runtime, dev and meta for one CUDA major.  The flavours for
    different CUDA majors install the same paths and conflict.  The EL
    packages (catalog_el) are libcudnn9-devel-cuda-X with the libraries in
    /usr/lib64, the headers in /usr/include and chkconfig's alternatives."""
    v = version + REVISION
    others = [m for m in all_majors if m != cuda_major]
    short = ".".join(version.split(".")[:3])
    lib_name = "libcudnn9-cuda-%s" % cuda_major
    dev_name = "libcudnn9-%s-cuda-%s" % (dev, cuda_major)
    return [
        Package(lib_name, v, "cuDNN runtime libraries for CUDA %s" % cuda_major, section="multiverse/libs",
                conflicts=tuple("libcudnn9-cuda-%s" % m for m in others),
                files=(Text(libdir + "/libcudnn.so.%s" % short, gen.placeholder("cuDNN " + version)),
                       Symlink(libdir + "/libcudnn.so.9", "libcudnn.so.%s" % short))),
        Package(dev_name, v, "cuDNN development headers and symlinks for CUDA %s" % cuda_major,
                section="multiverse/libdevel", depends=("%s (= %s)" % (lib_name, v),),
                conflicts=tuple("libcudnn9-%s-cuda-%s" % (dev, m) for m in others),
                files=(Text(includedir + "/cudnn_version_v9.h", gen.cudnn_version_h(version)),
                       Text(includedir + "/cudnn_v9.h", gen.cudnn_h())),
                postinst=scripts.cudnn_dev_postinst(includedir, alternatives),
                prerm=scripts.cudnn_dev_prerm(includedir, alternatives)),
        Package("cudnn9-cuda-%s" % cuda_major, v, "NVIDIA cuDNN for CUDA %s" % cuda_major,
                depends=("%s (= %s)" % (lib_name, v), "%s (= %s)" % (dev_name, v))),
    ]
