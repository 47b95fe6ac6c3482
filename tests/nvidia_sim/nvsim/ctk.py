# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated nvidia-ctk, the NVIDIA Container Toolkit CLI (test double).

Commands: ``--version``, ``runtime configure``, ``cdi generate``, ``cdi list``
and ``config`` (``--set``, ``--in-place``, ``default``).  The toolkit version
is baked into the simulated package (``usr/share/nvidia-sim/
container-toolkit-version``) and decides version-dependent behaviour, such as
the containerd drop-in file that 1.18 introduced.  Every file path is taken
below the simulator root so host-side tests never touch the real ``/etc``.
"""

import hashlib
import sys

from nvsim import ctk_log
from nvsim import env

PROG = "nvidia-ctk"
DEFAULT_VERSION = "1.18.0"
VERSION_FILE = ("usr", "share", "nvidia-sim", "container-toolkit-version")


class UsageError(Exception):
    pass


class CommandError(Exception):
    """A failed command; the message is logged at error level, exit status 1."""


def toolkit_version():
    try:
        with open(env.path(*VERSION_FILE)) as handle:
            return handle.read().strip() or DEFAULT_VERSION
    except (IOError, OSError):
        return DEFAULT_VERSION


def version_tuple(version=None):
    parts = []
    for piece in (version or toolkit_version()).split("-")[0].split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def parse_flags(args, spec):
    """urfave/cli-style flags: spec maps each name to (dest, kind, default).

    kind is "bool", "str" or "list" (repeatable); bool flags take an optional
    =true/=false.  Returns (values, positional).
    """
    values = {}
    for dest, kind, default in spec.values():
        values.setdefault(dest, list(default) if kind == "list" else default)
    positional = []
    args = list(args)
    while args:
        arg = args.pop(0)
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        if arg == "--":
            positional.extend(args)
            break
        name, sep, inline = arg.partition("=")
        if name not in spec:
            raise UsageError("flag provided but not defined: %s" % name)
        dest, kind, _unused = spec[name]
        if kind == "bool":
            if sep:
                if inline.lower() not in ("true", "false", "1", "0"):
                    raise UsageError('invalid boolean value "%s" for -%s' % (inline, name.lstrip("-")))
                values[dest] = inline.lower() in ("true", "1")
            else:
                values[dest] = True
            continue
        if not sep:
            if not args:
                raise UsageError("flag needs an argument: %s" % name)
            inline = args.pop(0)
        if kind == "list":
            values[dest].append(inline)
        else:
            values[dest] = inline
    return values, positional


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
            from nvsim import ctk_runtime
            return ctk_runtime.run(rest, logger)
        if command == "cdi":
            from nvsim import ctk_cdi
            return ctk_cdi.run(rest, logger)
        if command == "config":
            from nvsim import ctk_config
            return ctk_config.run(rest, logger)
        raise UsageError("No help topic for '%s'" % command)
    except UsageError as exc:
        sys.stderr.write("Incorrect Usage: %s\n\n" % exc)
        logger.error(str(exc))
        return 1
    except CommandError as exc:
        logger.error(str(exc))
        return 1
