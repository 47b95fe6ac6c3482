# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Maintainer scripts of the simulated packages (POSIX sh, as dpkg runs them).

They imitate what the real packages do on a host, minus the parts a
container cannot do (compiling and loading kernel modules).
"""

HEADER = "#!/bin/sh\nset -e\n"

# The kernels DKMS would build for: every /lib/modules/<kernel> and every
# /usr/src/linux-headers-<kernel> that is not a Debian "-common" half.
_KERNELS = r"""
sim_kernels() {
    {
        [ -d /lib/modules ] && ls -1 /lib/modules
        for d in /usr/src/linux-headers-*; do
            [ -d "$d" ] || continue
            k=${d#/usr/src/linux-headers-}
            case "$k" in *-common|*-common-rt) continue ;; esac
            echo "$k"
        done
    } 2>/dev/null | sort -u
}
"""


def _enable_unit(unit):
    # systemctl enable only writes symlinks, so it works while systemd is not
    # running (image builds); without systemctl the symlink is made by hand.
    return r"""
    if command -v systemctl >/dev/null 2>&1; then
        [ -d /run/systemd/system ] && systemctl daemon-reload >/dev/null 2>&1 || true
        systemctl enable %(unit)s >/dev/null 2>&1 || true
    else
        mkdir -p /etc/systemd/system/multi-user.target.wants
        ln -sf /lib/systemd/system/%(unit)s /etc/systemd/system/multi-user.target.wants/%(unit)s
    fi
""" % {"unit": unit}


def driver_utils_postinst(driver_version):
    """Package shipping nvidia-smi: enable the boot-time module loader and,
    on a first install, load the module as modprobe would."""
    return HEADER + r"""
case "$1" in
configure)
%(enable)s
    # Only a first load: an upgrade leaves the old module loaded, as on a
    # real host, until the next boot.
    nvidia-sim-modload --if-not-loaded || echo "nvidia-sim-modload failed (driver %(version)s)" >&2
    ;;
esac
exit 0
""" % {"enable": _enable_unit("nvidia-sim-modload.service"), "version": driver_version}


def persistenced_postinst():
    """The daemon drops to the nvidia-persistenced account; its unit is
    static, so nothing is enabled or started (as NVIDIA's packages do)."""
    return HEADER + r"""
case "$1" in
configure)
    if ! getent passwd nvidia-persistenced >/dev/null; then
        useradd --system --user-group --home-dir / --no-create-home \
            --shell /usr/sbin/nologin --comment "NVIDIA Persistence Daemon" nvidia-persistenced
    fi
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload >/dev/null 2>&1 || true
    fi
    ;;
esac
exit 0
"""


def dkms_postinst(driver_version):
    """Imitate 'dkms install' of module nvidia/<version> for every kernel
    present, without compiling: dkms status then reports it installed."""
    return HEADER + _KERNELS + r"""
ver=%(version)s
case "$1" in
configure)
    tree=/var/lib/dkms/nvidia/$ver
    mkdir -p "$tree"
    ln -sfn /usr/src/nvidia-$ver "$tree/source"
    built=0
    for k in $(sim_kernels); do
        moddir=$tree/$k/x86_64/module
        mkdir -p "$moddir" /lib/modules/$k/updates/dkms
        for m in nvidia nvidia-modeset nvidia-drm nvidia-uvm nvidia-peermem; do
            printf 'simulated kernel module %%s %%s for %%s (%%s)\n' "$m" "$ver" "$k" \
                "$(cat /usr/share/nvidia-sim/kernel-module-flavour)" > "$moddir/$m.ko"
            cp "$moddir/$m.ko" /lib/modules/$k/updates/dkms/$m.ko
            # What depmod would record; nvidia-cdi-refresh.service's start
            # condition greps modules.dep for /nvidia.ko.
            grep -qs "^updates/dkms/$m.ko:" /lib/modules/$k/modules.dep ||
                echo "updates/dkms/$m.ko:" >> /lib/modules/$k/modules.dep
        done
        ln -sfn "$ver/$k/x86_64" /var/lib/dkms/nvidia/kernel-$k-x86_64
        echo "nvidia/$ver, $k, x86_64: installed (simulated DKMS build)"
        built=$((built + 1))
    done
    if [ "$built" -eq 0 ]; then
        echo "nvidia/$ver: added (simulated DKMS: no kernel under /lib/modules or /usr/src/linux-headers-*)"
    fi
    ;;
esac
exit 0
""" % {"version": driver_version}


def dkms_prerm(driver_version):
    """Imitate 'dkms remove nvidia/<version> --all'."""
    return HEADER + r"""
ver=%(version)s
case "$1" in
remove|upgrade|deconfigure|failed-upgrade)
    for link in /var/lib/dkms/nvidia/kernel-*-x86_64; do
        [ -L "$link" ] || continue
        case "$(readlink "$link")" in
        "$ver"/*)
            k=${link#/var/lib/dkms/nvidia/kernel-}
            k=${k%%-x86_64}
            for m in nvidia nvidia-modeset nvidia-drm nvidia-uvm nvidia-peermem; do
                rm -f /lib/modules/$k/updates/dkms/$m.ko
                [ -f /lib/modules/$k/modules.dep ] &&
                    sed -i "\\#^updates/dkms/$m.ko:#d" /lib/modules/$k/modules.dep
            done
            rm -f "$link"
            ;;
        esac
    done
    rm -rf /var/lib/dkms/nvidia/$ver
    rmdir /var/lib/dkms/nvidia 2>/dev/null || true
    ;;
esac
exit 0
""" % {"version": driver_version}


def cudnn_dev_postinst(header_dir, command="update-alternatives"):
    """cuDNN dev packages register cudnn.h and cudnn_version.h as alternatives
    (command: update-alternatives, or chkconfig's alternatives on EL)."""
    return HEADER + r"""
case "$1" in
configure)
    %(command)s --install /usr/include/cudnn.h libcudnn %(dir)s/cudnn_v9.h 90 \
        --slave /usr/include/cudnn_version.h libcudnn_version_h %(dir)s/cudnn_version_v9.h
    ;;
esac
exit 0
""" % {"dir": header_dir, "command": command}


def cudnn_dev_prerm(header_dir, command="update-alternatives"):
    return HEADER + r"""
case "$1" in
remove|deconfigure)
    %(command)s --remove libcudnn %(dir)s/cudnn_v9.h
    ;;
esac
exit 0
""" % {"dir": header_dir, "command": command}


def container_toolkit_base_postinst(cdi_refresh):
    """nvidia-container-toolkit-base: write the default config; from 1.18 also
    enable the CDI refresh units when systemd runs."""
    refresh = r"""
        if command -v systemctl >/dev/null 2>&1; then
            SYSTEMD_STATE=$(systemctl is-system-running 2>/dev/null || true)
            case "$SYSTEMD_STATE" in
            running|degraded)
                systemctl daemon-reload || echo "Warning: Failed to reload systemd daemon" >&2
                systemctl enable --now nvidia-cdi-refresh.path || echo "Warning: Failed to enable nvidia-cdi-refresh.path" >&2
                systemctl enable --now nvidia-cdi-refresh.service || echo "Warning: Failed to enable nvidia-cdi-refresh.service" >&2
                ;;
            esac
        fi
""" if cdi_refresh else ""
    return HEADER + r"""
case "$1" in
configure)
    /usr/bin/nvidia-ctk --quiet config --config-file=/etc/nvidia-container-runtime/config.toml --in-place
%(refresh)s    ;;
esac
exit 0
""" % {"refresh": refresh}


def dcgm_core_postinst():
    """DCGM: the service account nv-hostengine drops to, and its log directory
    (NVIDIA/DCGM scripts/deb/postinst)."""
    return r"""#!/bin/sh
set -uf
service_user=nvidia-dcgm
useradd -Urs /usr/sbin/nologin ${service_user} 2>/dev/null
retcode=$?
set -e
# 9: the account already exists (upgrade, reinstall).
if [ $retcode -ne 0 ] && [ $retcode -ne 9 ]; then
    exit $retcode
fi
mkdir -p /var/log/nvidia-dcgm
chown ${service_user}:${service_user} /var/log/nvidia-dcgm
chmod 755 /var/log/nvidia-dcgm
exit 0
"""


def prebuilt_modules_postinst(kernel, subdir, modules):
    """A linux-restricted-modules ABI package: the real one runs depmod for
    its kernel; the simulation records what depmod would (the kernel's
    modules.dep is what nvidia-cdi-refresh.service's start condition greps)."""
    return HEADER + r"""
k=%(kernel)s
case "$1" in
configure)
    mkdir -p /lib/modules/$k
    for m in %(modules)s; do
        grep -qs "^kernel/%(subdir)s/$m.ko:" /lib/modules/$k/modules.dep ||
            echo "kernel/%(subdir)s/$m.ko:" >> /lib/modules/$k/modules.dep
    done
    ;;
esac
exit 0
""" % {"kernel": kernel, "subdir": subdir, "modules": " ".join(modules)}


def prebuilt_modules_postrm(kernel, subdir):
    """Undo prebuilt_modules_postinst's modules.dep lines (depmod after removal)."""
    return HEADER + r"""
k=%(kernel)s
case "$1" in
remove|purge)
    [ -f /lib/modules/$k/modules.dep ] && sed -i "\\#^kernel/%(subdir)s/#d" /lib/modules/$k/modules.dep
    ;;
esac
exit 0
""" % {"kernel": kernel, "subdir": subdir}
