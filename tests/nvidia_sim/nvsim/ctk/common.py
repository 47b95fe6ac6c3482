# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every command of the simulated nvidia-ctk shares: errors, urfave/cli
style flag parsing and the toolkit version (test double)."""

from nvsim import env

PROG = "nvidia-ctk"
DEFAULT_VERSION = "1.18.0"


class UsageError(Exception):
    pass


class CommandError(Exception):
    """A failed command; the message is logged at error level, exit status 1."""


def toolkit_version():
    return env.component_version("container-toolkit", DEFAULT_VERSION)


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
