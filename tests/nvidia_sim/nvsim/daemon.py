# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Process plumbing shared by the simulated daemons (test double).

The real daemons fork, let the parent wait until the child reports that its
initialisation worked, and exit the parent with that result; systemd units of
``Type=forking`` rely on exactly that.  ``Daemon`` does the same with a pipe,
writes and removes pid files, and logs both to syslog (inside containers,
where the journal is the place people look) and to
``var/log/nvidia-sim/<prog>.log`` below the sim root (where tests look).
"""

import errno
import fcntl
import os
import signal
import sys
import time

from nvsim import env


class InitError(Exception):
    """Initialisation failed; str() is the message the parent reports."""


class Logger(object):
    def __init__(self, prog, path=None, id_label="pid"):
        self.prog = prog
        self.id_label = id_label
        self.path = path or env.daemon_log_path(prog)
        self.handle = None
        self.use_syslog = env.root() in ("", "/")
        if self.use_syslog:
            try:
                import syslog
                syslog.openlog(prog, syslog.LOG_PID, syslog.LOG_DAEMON)
                self._syslog = syslog
            except ImportError:  # pragma: no cover - syslog exists on Linux
                self.use_syslog = False

    def open(self):
        """Open the log file now (before privileges are dropped)."""
        if self.handle is None:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self.handle = open(self.path, "a")
            except (IOError, OSError):
                self.handle = None
        return self

    def log(self, level, message):
        self.open()
        if self.handle is not None:
            stamp = time.strftime("%b %d %Y %H:%M:%S")
            self.handle.write("[%s] [%s] [%s %d] %s\n" % (stamp, level, self.id_label, os.getpid(), message))
            self.handle.flush()
        if self.use_syslog:
            priority = {"ERROR": self._syslog.LOG_ERR, "WARNING": self._syslog.LOG_WARNING,
                        "NOTICE": self._syslog.LOG_NOTICE}.get(level, self._syslog.LOG_INFO)
            self._syslog.syslog(priority, message)

    def info(self, message):
        self.log("INFO", message)

    def notice(self, message):
        self.log("NOTICE", message)

    def error(self, message):
        self.log("ERROR", message)


class PidFile(object):
    """A locked pid file like the real daemons keep (lockf on the open file)."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def acquire(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise InitError("Failed to lock PID file: %s" % os.strerror(exc.errno or errno.EAGAIN))
        os.ftruncate(fd, 0)
        os.write(fd, ("%d\n" % os.getpid()).encode())
        self.fd = fd

    def release(self):
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def read_pid(path):
    try:
        with open(path) as handle:
            value = handle.read().strip()
    except (IOError, OSError):
        return None
    return int(value) if value.isdigit() else None


def detach(init, run, foreground=False, failure_message=None, failure_status=1, stream=None):
    """Run init() in a daemon child and report its outcome from the parent.

    init() raises InitError on failure; its message is printed by the parent
    (or failure_message when the real tool only points at the logs).  On
    success it may return text for the parent to print on stdout.  run()
    is the main loop of the child.  With foreground=True nothing forks.
    Returns the exit status for the calling process (the parent).
    """
    if foreground:
        try:
            announcement = init()
        except InitError as exc:
            (stream or sys.stderr).write("%s\n" % (failure_message or exc))
            return failure_status
        if announcement:
            sys.stdout.write(announcement)
            sys.stdout.flush()
        run()
        return 0

    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid > 0:
        os.close(write_fd)
        data = b""
        while True:
            chunk = os.read(read_fd, 4096)
            if not chunk:
                break
            data += chunk
        os.close(read_fd)
        # The first child exits as soon as the daemon is forked off; reap it.
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass
        if data.startswith(b"OK"):
            # The daemon may hand back what the real one prints before it
            # closes the console (e.g. nv-hostengine's "Started host engine").
            if data[2:]:
                sys.stdout.write(data[2:].decode("utf-8", "replace"))
                sys.stdout.flush()
            return 0
        message = data.decode("utf-8", "replace").strip() or "initialisation failed"
        (stream or sys.stderr).write("%s\n" % (failure_message or message))
        return failure_status

    # First child: new session, then fork again so the daemon is not a
    # session leader and is re-parented to init like the real ones.
    os.close(read_fd)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    _redirect_stdio()
    try:
        announcement = init()
    except InitError as exc:
        os.write(write_fd, str(exc).encode("utf-8"))
        os.close(write_fd)
        os._exit(1)
    except Exception as exc:  # report, never leave the parent waiting
        os.write(write_fd, ("internal error: %s" % exc).encode("utf-8"))
        os.close(write_fd)
        os._exit(1)
    os.write(write_fd, b"OK" + (announcement or "").encode("utf-8"))
    os.close(write_fd)
    try:
        run()
    finally:
        os._exit(0)


def _redirect_stdio():
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if devnull > 2:
        os.close(devnull)


TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


def block_termination_signals():
    """Block SIGTERM/SIGINT/SIGQUIT; call before starting threads so they inherit it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATION_SIGNALS)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def wait_for_termination():
    """Block until SIGTERM/SIGINT/SIGQUIT arrives; return the signal number.

    sigwait() on blocked signals cannot miss one that arrives early, which a
    handler plus pause() could.
    """
    block_termination_signals()
    return signal.sigwait(TERMINATION_SIGNALS)
