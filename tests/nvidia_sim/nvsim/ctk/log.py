# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Log lines of the simulated nvidia-ctk, formatted like logrus (test double).

logrus writes ``INFO[0000] message`` (coloured, message padded to 44
columns) on a terminal and ``time="..." level=info msg="..."`` otherwise,
always on stderr.  ``--quiet`` keeps only errors, ``--debug`` adds debug
lines.
"""

import sys
import time

LEVELS = {"debug": 0, "info": 1, "warning": 2, "error": 3}
_LABELS = {"debug": "DEBU", "info": "INFO", "warning": "WARN", "error": "ERRO"}
_COLOURS = {"debug": 37, "info": 36, "warning": 33, "error": 31}
_START = time.time()


class Logger(object):
    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.threshold = LEVELS["info"]

    def set_quiet(self):
        self.threshold = LEVELS["error"]

    def set_debug(self):
        self.threshold = LEVELS["debug"]

    def _emit(self, level, message):
        if LEVELS[level] < self.threshold:
            return
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty:
            line = "\x1b[%dm%s\x1b[0m[%04d] %-44s \n" % (
                _COLOURS[level], _LABELS[level], int(time.time() - _START), message)
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            stamp = stamp[:-2] + ":" + stamp[-2:] if stamp[-5] in "+-" else stamp
            line = 'time="%s" level=%s msg=%s\n' % (stamp, level, _quote(message))
        self.stream.write(line)
        self.stream.flush()

    def debug(self, message):
        self._emit("debug", message)

    def info(self, message):
        self._emit("info", message)

    def warning(self, message):
        self._emit("warning", message)

    def error(self, message):
        self._emit("error", message)


def _quote(message):
    # logrus quotes values that contain anything beyond word characters and a few symbols.
    if message and all(c.isalnum() or c in "-._/@^+" for c in message):
        return message
    return '"%s"' % message.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
