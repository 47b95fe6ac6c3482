# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serve the simulated NVIDIA repositories over HTTP (test double).

    python3 serve.py --dir DIR [--port 8765] [--bind 127.0.0.1] [--pidfile FILE] [--log FILE]
    python3 serve.py --stop --pidfile FILE

With --pidfile the server detaches and this command returns once it
listens; test containers with host networking reach it on loopback.
"""

import argparse
import errno
import functools
import http.server
import os
import signal
import sys
import time


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    log_file = None

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        if self.log_file:
            self.log_file.write("%s - %s\n" % (self.address_string(), format % args))
            self.log_file.flush()


def make_server(directory, bind, port, log_file=None):
    handler = functools.partial(QuietHandler, directory=directory)
    QuietHandler.log_file = log_file
    server = http.server.ThreadingHTTPServer((bind, port), handler)
    server.daemon_threads = True
    return server


def _read_pid(pidfile):
    try:
        with open(pidfile) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def stop(pidfile, timeout=5.0):
    pid = _read_pid(pidfile)
    if pid is None:
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError as exc:
        if exc.errno != errno.ESRCH:
            raise
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.05)
    try:
        os.unlink(pidfile)
    except OSError:
        pass
    return 0


def _detach(pidfile):
    """Double fork; the parent returns True, the daemon False."""
    if os.fork():
        # Wait until the daemon has written its pid file, so the caller can
        # rely on it when this command returns.
        for _attempt in range(100):
            if _read_pid(pidfile):
                return True
            time.sleep(0.05)
        return True
    os.setsid()
    if os.fork():
        os._exit(0)  # pylint: disable=protected-access
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    tmp = "%s.%d" % (pidfile, os.getpid())
    with open(tmp, "w") as handle:
        handle.write("%d\n" % os.getpid())
    os.replace(tmp, pidfile)
    return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--dir", help="repository directory built by build_repo.py")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--pidfile", help="detach and write the daemon's pid here")
    parser.add_argument("--log", help="append the access log to this file")
    parser.add_argument("--stop", action="store_true", help="stop the server of --pidfile")
    args = parser.parse_args(argv)
    if args.stop:
        if not args.pidfile:
            parser.error("--stop needs --pidfile")
        return stop(args.pidfile)
    if not args.dir or not os.path.isdir(args.dir):
        parser.error("--dir must name the built repository directory")
    directory = os.path.abspath(args.dir)
    log_file = open(args.log, "a") if args.log else None  # pylint: disable=consider-using-with
    # Bind before detaching so that a busy port fails this command.
    try:
        server = make_server(directory, args.bind, args.port, log_file)
    except OSError as exc:
        print("serve.py: cannot listen on %s:%d: %s" % (args.bind, args.port, exc.strerror), file=sys.stderr)
        return 1
    if args.pidfile:
        pidfile = os.path.abspath(args.pidfile)
        if _detach(pidfile):
            return 0
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            server.serve_forever()
        finally:
            if _read_pid(pidfile) == os.getpid():
                os.unlink(pidfile)
        return 0
    print("serving %s on http://%s:%d/" % (directory, args.bind, args.port), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
