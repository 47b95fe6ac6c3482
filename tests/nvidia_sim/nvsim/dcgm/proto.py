# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wire protocol between the simulated nv-hostengine and its clients (test double).

The real host engine speaks a binary protocol; the simulator only needs
``dcgmi`` and ``dcgm-exporter`` to reach the engine the same way (TCP port
or Unix socket, refused when nothing listens), so requests and answers are
one JSON object per line.  Error statuses are DCGM's ``dcgmReturn_t`` values.
"""

import json
import os
import socket

from nvsim import env
from nvsim import gpus

DEFAULT_PORT = 5555
DEFAULT_SOCKET = env.HOSTENGINE_SOCKET
DEFAULT_DCGM_VERSION = "4.4.2"

ST_OK = 0
ST_BADPARAM = -1
ST_GENERIC_ERROR = -3
ST_NOT_CONFIGURED = -6
ST_NOT_SUPPORTED = -8
ST_CONNECTION_NOT_VALID = -21
ST_NVVS_ERROR = -30

ERROR_STRINGS = {
    ST_OK: "Success",
    ST_BADPARAM: "Bad parameter passed to function",
    ST_GENERIC_ERROR: "Generic unspecified error",
    ST_NOT_CONFIGURED: "Setting not configured",
    ST_NOT_SUPPORTED: "Feature not supported",
    ST_CONNECTION_NOT_VALID: "Host engine connection invalid/disconnected",
    ST_NVVS_ERROR: "Detected an error while running the DCGM diagnostic",
}

# The host engine's built-in groups, as `dcgmi group -l` lists them.
GROUP_ALL_GPUS = 0
GROUP_ALL_NVSWITCHES = 1


def dcgm_version():
    """DCGM version of the installed simulated package (baked at build time)."""
    return env.component_version("dcgm", DEFAULT_DCGM_VERSION)


def error_string(status):
    return ERROR_STRINGS.get(status, "Unknown error")


def exit_status(status):
    """dcgmi returns dcgmReturn_t from main(): the shell sees it modulo 256."""
    return status & 0xFF


class Address(object):
    """Where an engine listens: ('tcp', host, port) or ('unix', path)."""

    def __init__(self, kind, host=None, port=None, path=None):
        self.kind = kind
        self.host = host
        self.port = port
        self.path = path

    def __str__(self):
        if self.kind == "unix":
            return "unix://" + self.path
        return "%s:%d" % (self.host, self.port)


def parse_address(text, default_port=DEFAULT_PORT):
    """Parse dcgmi --host / dcgm-exporter -r values.

    Accepts ``host``, ``host:port``, ``[v6]:port``, ``tcp://host:port`` and
    ``unix:///socket/path``.
    """
    if text.startswith("unix://"):
        path = text[len("unix://"):] or DEFAULT_SOCKET
        return Address("unix", path=gpus.resolve(path))
    if text.startswith("tcp://"):
        text = text[len("tcp://"):]
    if text.startswith("["):
        host, _unused, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _unused, port = text.partition(":")
    else:
        host, port = text, ""
    if port and not port.isdigit():
        raise ValueError("invalid port (non-numeric) in: %s" % text)
    return Address("tcp", host=host or "localhost", port=int(port) if port else default_port)


def connect(address, timeout=5.0):
    """Open a socket to the engine; raises OSError when nobody listens."""
    if address.kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        directory, name = os.path.split(address.path)
        cwd = os.getcwd()
        try:
            # Relative connect keeps long test-root paths under sun_path's limit.
            os.chdir(directory or ".")
            sock.connect(name)
        except OSError:
            sock.close()
            raise
        finally:
            os.chdir(cwd)
        return sock
    last = None
    for family, kind, proto, _unused, sockaddr in socket.getaddrinfo(
            address.host, address.port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        sock.settimeout(timeout)
        try:
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            last = exc
            sock.close()
    raise last or OSError("cannot resolve %s" % address.host)


class Client(object):
    def __init__(self, address, timeout=30.0):
        self.sock = connect(address, timeout=min(timeout, 5.0))
        self.sock.settimeout(timeout)
        self.reader = self.sock.makefile("r")

    def call(self, op, **params):
        params["op"] = op
        self.sock.sendall((json.dumps(params) + "\n").encode("utf-8"))
        line = self.reader.readline()
        if not line:
            raise OSError("host engine closed the connection")
        return json.loads(line)

    def close(self):
        try:
            self.reader.close()
            self.sock.close()
        except OSError:
            pass


def open_client(address, timeout=30.0):
    """Client after a successful hello, or None when the engine is unreachable."""
    try:
        client = Client(address, timeout=timeout)
        reply = client.call("hello")
    except (OSError, ValueError):
        return None
    if reply.get("status") != ST_OK:
        client.close()
        return None
    return client
