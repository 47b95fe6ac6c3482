"""What Debian's unattended-upgrade -d prints, read by the tests that run it
(molecule/faults case 10, molecule/nvidia_driver_distribution)."""
import re

_CANDIDATES = re.compile(r"(?m)^pkgs that look like they should be upgraded: (\S*)\n((?:\S+\n)*)")
_DECISIONS = re.compile(r"Allowed origins|blacklist|Checking|adjusting|look like|will be upgraded|left to upgrade|"
                        r"kept|held|InstCount|upgrade result|[Ee]rror")


def candidates(text):
    """The packages listed as "pkgs that look like they should be upgraded", one a line."""
    found = _CANDIDATES.search(text)
    return ([found.group(1)] + found.group(2).split()) if found and found.group(1) else []


def summary(text):
    """What unattended-upgrade decided, without its pinning chatter: the lines a failure is read by."""
    return "\n".join(line for line in text.splitlines() if _DECISIONS.search(line))[-4000:]
