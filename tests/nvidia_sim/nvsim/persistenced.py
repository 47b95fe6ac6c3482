# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated nvidia-persistenced (test double).

Mirrors the real daemon's contract: options, fork with the parent waiting
for initialisation, ``/var/run/nvidia-persistenced/nvidia-persistenced.pid``
(locked) and ``socket``, privilege drop to ``--user``, failure when the
kernel module is missing or does not match the userspace, cleanup on
SIGTERM.  Whether the daemon holds persistence mode on (``--persistence-mode``,
the default) or not (``--no-persistence-mode``, what the packaged unit passes)
is published in ``env.PERSISTENCED_MODE_FILE`` next to the pid file; ``daemon_persistence_mode()``
reads it back for ``nvidia-smi``.
"""

import grp
import json
import os
import pwd
import socket
import sys

from nvsim import daemon
from nvsim import env
from nvsim import gpus

PROG = "nvidia-persistenced"

USAGE_OPTIONS = (
    ("-v, --version", "Print the utility version and exit."),
    ("-h, --help", "Print usage information for the command line options and exit."),
    ("-V, --verbose", "Controls how much information is printed. By default, nvidia-persistenced will "
                      "only print errors and warnings to syslog for unexpected events, as well as startup "
                      "and shutdown notices. Specifying this flag will cause nvidia-persistenced to also "
                      "print notices to syslog on state transitions, such as when persistence mode is "
                      "enabled or disabled, and informational messages on startup and exit."),
    ("-u USERNAME, --user=USERNAME", "Runs nvidia-persistenced with the user permissions of the user "
                                     "specified by the USERNAME argument."),
    ("-g GROUPNAME, --group=GROUPNAME", "Runs nvidia-persistenced with the group permissions of the "
                                        "group specified by the GROUPNAME argument."),
    ("--persistence-mode, --no-persistence-mode", "By default, nvidia-persistenced starts with persistence "
                                                  "mode enabled for all devices. Use '--no-persistence-mode' "
                                                  "to force persistence mode off for all devices on startup."),
    ("--uvm-persistence-mode, --no-uvm-persistence-mode", "UVM persistence mode is only supported on the "
                                                          "single GPU confidential computing configuration."),
    ("--nvidia-cfg-path=PATH", "Where to look for the nvidia-cfg library."),
    ("-f, --foreground", "Runs the process in the foreground instead of detaching."),
)


class Options(object):
    def __init__(self):
        self.verbose = False
        self.user = None
        self.group = None
        self.persistence_mode = True
        self.uvm_persistence_mode = False
        self.foreground = False


def daemon_persistence_mode():
    """None when no daemon runs, else whether it holds persistence mode on (see env)."""
    return env.daemon_persistence_mode()


def _error(message):
    # nvidia-persistenced prints errors framed by blank lines.
    sys.stderr.write("\nERROR: %s\n\n" % message)


def _version_text():
    return ("\n%s:  version %s\n\n  The NVIDIA Persistence Daemon.\n\n"
            "  A tool for maintaining persistent driver state, specifically for use by the NVIDIA "
            "Linux driver.\n\n  Copyright (C) 2013-2018 NVIDIA Corporation.\n\n"
            % (PROG, env.installed_driver_version() or "unknown"))


def _help_text():
    lines = [_version_text(), "nvidia-persistenced [options]", ""]
    for name, text in USAGE_OPTIONS:
        lines.append("  " + name)
        lines.append("      " + text)
        lines.append("")
    lines.append('For more detailed usage information, please see the nvidia-persistenced manpage and '
                 'the "Using the nvidia-persistenced Utility" section of the NVIDIA Linux Graphics '
                 'Driver README.')
    return "\n".join(lines) + "\n"


def parse(argv):
    """Parse like nvgetopt: returns Options, or an int exit status."""
    opts = Options()
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, _unused, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in ("-v", "--version"):
            sys.stdout.write(_version_text())
            return 0
        if name in ("-h", "--help"):
            sys.stdout.write(_help_text())
            return 0
        if name in ("-V", "--verbose"):
            opts.verbose = True
        elif name in ("-f", "--foreground"):
            opts.foreground = True
        elif name in ("-u", "--user", "-g", "--group", "--nvidia-cfg-path"):
            if inline:
                value = inline
            elif args:
                value = args.pop(0)
            else:
                _error("Option '%s' requires an argument." % name)
                return 1
            if name in ("-u", "--user"):
                opts.user = value
            elif name in ("-g", "--group"):
                opts.group = value
        elif name == "--persistence-mode":
            opts.persistence_mode = True
        elif name == "--no-persistence-mode":
            opts.persistence_mode = False
        elif name == "--uvm-persistence-mode":
            opts.uvm_persistence_mode = True
        elif name == "--no-uvm-persistence-mode":
            opts.uvm_persistence_mode = False
        else:
            # The real tool exits successfully here; scripts relying on the
            # status would not notice the typo either.
            _error("Invalid commandline, please run `%s --help` for usage information." % PROG)
            return 0
    return opts


class Persistenced(object):
    def __init__(self, opts, uid, gid):
        self.opts = opts
        self.uid = uid
        self.gid = gid
        self.log = daemon.Logger(PROG)
        self.pidfile = daemon.PidFile(env.path(*env.PERSISTENCED_PID))
        self.created_dir = False
        self.sock = None
        self.devices = []
        self.wrote_mode = False

    def verbose(self, message):
        if self.opts.verbose:
            self.log.info(message)

    def init(self):
        self.log.open()
        self.verbose("Verbose syslog connection opened")
        # Read the hardware while still privileged: the first reader after a
        # boot writes the simulator's state files.
        self.devices = _safe_gpus() if gpus.driver_problem() is None else []
        run_dir = env.path(*env.PERSISTENCED_RUN_DIR)
        try:
            os.makedirs(run_dir)
            self.created_dir = True
        except OSError:
            self.verbose("Directory %s will not be removed on exit" % run_dir)
        if (os.getuid(), os.getgid()) != (self.uid, self.gid):
            try:
                os.chown(run_dir, self.uid, self.gid)
                os.setgid(self.gid)
                os.setuid(self.uid)
            except OSError as exc:
                self.log.error("Failed to change ownership of %s: %s" % (run_dir, exc.strerror))
                self.shutdown()
                raise daemon.InitError("failed")
            self.verbose("Now running with user ID %d and group ID %d" % (self.uid, self.gid))
        try:
            self.pidfile.acquire()
        except daemon.InitError as exc:
            self.log.error(str(exc))
            self.shutdown()
            raise
        self.log.notice("Started (%d)" % os.getpid())
        try:
            self.setup_devices()
        except daemon.InitError as exc:
            self.log.error(str(exc))
            self.shutdown()
            raise
        self.open_socket()
        self.verbose("Local RPC services initialized")

    def setup_devices(self):
        if gpus.driver_problem() is not None:
            raise daemon.InitError(
                "Failed to query NVIDIA devices. Please ensure that the NVIDIA device files "
                "(/dev/nvidia*) exist, and that user %d has read and write permissions for those "
                "files." % os.getuid())
        devices = self.devices
        if not devices:
            raise daemon.InitError("Unable to find any NVIDIA devices")
        for gpu in devices:
            self.verbose("device %s - registered" % gpu.short_bus_id)
            if self.opts.persistence_mode:
                self.verbose("device %s - persistence mode enabled." % gpu.short_bus_id)
        self.wrote_mode = True
        env.write_file(env.PERSISTENCED_MODE_FILE, json.dumps({
            "pid": os.getpid(), "persistence_mode": self.opts.persistence_mode,
            "uvm_persistence_mode": self.opts.uvm_persistence_mode}) + "\n")

    def open_socket(self):
        path = env.path(*env.PERSISTENCED_SOCKET)
        try:
            os.unlink(path)
        except OSError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        cwd = os.getcwd()
        try:
            # Bind by basename: test roots can exceed the 108-byte sun_path.
            os.chdir(os.path.dirname(path))
            sock.bind(os.path.basename(path))
            sock.listen(8)
            self.sock = sock
        except OSError as exc:
            sock.close()
            self.log.error("Failed to create RPC service: %s" % exc.strerror)
        finally:
            os.chdir(cwd)

    def shutdown(self):
        if self.sock is not None:
            self.sock.close()
            self.verbose("Socket closed.")
            try:
                os.unlink(env.path(*env.PERSISTENCED_SOCKET))
            except OSError:
                pass
        if self.opts.persistence_mode:
            for gpu in self.devices:
                self.verbose("device %s - persistence mode disabled." % gpu.short_bus_id)
        if self.wrote_mode:
            try:
                os.unlink(env.path(*env.PERSISTENCED_MODE_FILE))
            except OSError:
                pass
        if self.pidfile.fd is not None:
            self.pidfile.release()
            self.verbose("PID file closed.")
        if self.created_dir:
            try:
                os.rmdir(env.path(*env.PERSISTENCED_RUN_DIR))
            except OSError:
                pass
        self.log.notice("Shutdown (%d)" % os.getpid())

    def run(self):
        signum = daemon.wait_for_termination()
        self.verbose("Received signal %d" % signum)
        self.shutdown()


def _safe_gpus():
    try:
        return gpus.load_gpus()
    except Exception:  # the driver may have gone away meanwhile
        return []


def main(argv=None):
    argv = sys.argv if argv is None else argv
    env.log_call(PROG, argv[1:])
    opts = parse(argv[1:])
    if isinstance(opts, int):
        return opts
    uid, gid = os.getuid(), os.getgid()
    if opts.user is not None:
        try:
            entry = pwd.getpwnam(opts.user)
        except KeyError:
            _error("Failed to find user ID of user '%s': Success" % opts.user)
            return 1
        uid, gid = entry.pw_uid, entry.pw_gid
    if opts.group is not None:
        try:
            gid = grp.getgrnam(opts.group).gr_gid
        except KeyError:
            _error("Failed to find group ID of group '%s': Success" % opts.group)
            return 1
    service = Persistenced(opts, uid, gid)
    # Blocked before anything is written, so SIGTERM right after start still cleans up.
    daemon.block_termination_signals()
    return daemon.detach(service.init, service.run, foreground=opts.foreground,
                         failure_message="nvidia-persistenced failed to initialize. "
                                         "Check syslog for more details.")
