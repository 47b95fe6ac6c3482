# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated nvidia-ctk, the NVIDIA Container Toolkit CLI (test double).

Commands: ``--version``, ``runtime configure``, ``cdi generate``, ``cdi list``
and ``config`` (``--set``, ``--in-place``, ``default``).  The toolkit version
is baked into the simulated package (``usr/share/nvidia-sim/
container-toolkit-version``, see ``env``) and decides version-dependent behaviour, such as
the containerd drop-in file that 1.18 introduced.  Every file path is taken
below the simulator root so host-side tests never touch the real ``/etc``.
"""

import hashlib
import sys

from nvsim import env
from nvsim.ctk import log as ctk_log
from nvsim.ctk.common import PROG, CommandError, UsageError, parse_flags, toolkit_version


def _version_text():
    version = toolkit_version()
    commit = hashlib.sha1(("nvidia-container-toolkit " + version).encode()).hexdigest()
    return "NVIDIA Container Toolkit CLI version %s\ncommit: %s\n" % (version, commit)


GLOBAL_FLAGS = {
    "--debug": ("debug", "bool", False), "-d": ("debug", "bool", False),
    "--quiet": ("quiet", "bool", False), "-q": ("quiet", "bool", False),
    "--version": ("version", "bool", False), "-v": ("version", "bool", False),
    "--help": ("help", "bool", False), "-h": ("help", "bool", False),
}


def main(argv=None):
    argv = sys.argv if argv is None else argv
    env.log_call(PROG, argv[1:])
    logger = ctk_log.Logger()
    args = list(argv[1:])
    # Global flags come before the command name.
    global_args = []
    while args and args[0].startswith("-"):
        global_args.append(args.pop(0))
    try:
        options, _unused = parse_flags(global_args, GLOBAL_FLAGS)
    except UsageError as exc:
        sys.stderr.write("Incorrect Usage: %s\n\n" % exc)
        return 1
    if options["quiet"]:
        logger.set_quiet()
    if options["debug"]:
        logger.set_debug()
    if options["version"]:
        sys.stdout.write(_version_text())
        return 0
    if not args or options["help"]:
        sys.stdout.write("NAME:\n   NVIDIA Container Toolkit CLI\n\nUSAGE:\n   nvidia-ctk [global options] "
                         "command [command options]\n\nVERSION:\n   %s\nCOMMANDS:\n   runtime, cdi, config\n"
                         % toolkit_version())
        return 0
    command, rest = args[0], args[1:]
    try:
        if command == "runtime":
            from nvsim.ctk import runtime
            return runtime.run(rest, logger)
        if command == "cdi":
            from nvsim.ctk import cdi
            return cdi.run(rest, logger)
        if command == "config":
            from nvsim.ctk import config
            return config.run(rest, logger)
        raise UsageError("No help topic for '%s'" % command)
    except UsageError as exc:
        sys.stderr.write("Incorrect Usage: %s\n\n" % exc)
        logger.error(str(exc))
        return 1
    except CommandError as exc:
        logger.error(str(exc))
        return 1
