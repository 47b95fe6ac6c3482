# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated dcgm-exporter (test double).

Serves Prometheus text on ``/metrics``: ``# HELP``/``# TYPE`` and one sample
per GPU (per GPU instance in MIG mode) for every counter of the collectors
CSV, labelled like the real exporter (``gpu``, ``UUID``, ``pci_bus_id``,
``device``, ``modelName``, ``Hostname`` and every ``label`` counter such as
``DCGM_FI_DRIVER_VERSION``).  Values come from the host engine given with
``-r`` (which must be reachable, as for the real one) or, without ``-r``,
from an embedded engine that needs a working driver.  Samples are taken on
every scrape, so a test sees a state change at once (the real exporter
caches for ``--collect-interval``).
"""

import base64
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

from nvsim import daemon
from nvsim import env
from nvsim import gpus as gpu_info
from nvsim.dcgm import exporter_config as config
from nvsim.dcgm import fields as dcgm_fields
from nvsim.dcgm import proto

PROG = "dcgm-exporter"
DEFAULT_COLLECTORS = env.DCGM_EXPORTER_COLLECTORS
DEFAULT_VERSION = "4.4.2-4.7.0"


def exporter_version():
    return env.component_version("dcgm-exporter", DEFAULT_VERSION)


# --- logging like Go's slog text handler ------------------------------------------

def _quote(value):
    text = str(value)
    if not text or any(c in text for c in ' "=\n\t'):
        return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return text


def log(level, message, **attrs):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S") + ".%03d" % (int(time.time() * 1000) % 1000)
    offset = time.strftime("%z")
    stamp += (offset[:3] + ":" + offset[3:]) if offset not in ("+0000", "") else "Z"
    parts = ["time=" + stamp, "level=" + level, "msg=" + _quote(message)]
    parts.extend("%s=%s" % (key, _quote(value)) for key, value in attrs.items())
    sys.stderr.write(" ".join(parts) + "\n")
    sys.stderr.flush()


# --- options --------------------------------------------------------------------------

class Options(object):
    def __init__(self):
        self.collectors = os.environ.get("DCGM_EXPORTER_COLLECTORS", DEFAULT_COLLECTORS)
        self.address = os.environ.get("DCGM_EXPORTER_LISTEN", ":9400")
        self.interval = os.environ.get("DCGM_EXPORTER_INTERVAL", "30000")
        self.remote = os.environ.get("DCGM_REMOTE_HOSTENGINE_INFO")
        self.web_config = os.environ.get("DCGM_EXPORTER_WEB_CONFIG_FILE") or None
        self.kubernetes = False
        self.no_hostname = os.environ.get("DCGM_EXPORTER_NO_HOSTNAME", "").lower() in ("1", "true")


VALUE_FLAGS = {
    "-f": "collectors", "--collectors": "collectors", "-a": "address", "--address": "address",
    "-c": "interval", "--collect-interval": "interval", "-r": "remote",
    "--remote-hostengine-info": "remote", "--web-config-file": "web_config",
}
# Flags the simulator accepts and ignores (their effect needs Kubernetes or debugging aids).
IGNORED_VALUE_FLAGS = ("-d", "--devices", "-s", "--switch-devices", "-p", "--cpu-devices",
                       "-m", "--configmap-data", "--log-format", "--dcgm-log-level", "-x",
                       "--xid-count-window-size", "--clock-events-count-window-size",
                       "--kubernetes-gpu-id-type", "--pod-resources-kubelet-socket",
                       "--hpc-job-mapping-dir", "--web-read-timeout", "--web-write-timeout",
                       "--config-file")
IGNORED_BOOL_FLAGS = ("-k", "--kubernetes", "-o", "--use-old-namespace", "--debug",
                      "--enable-dcgm-log", "--fake-gpus", "--replace-blanks-in-model-name",
                      "--kubernetes-virtual-gpus", "--kubernetes-enable-pod-labels",
                      "--web-systemd-socket", "--disable-startup-validate")


def parse(argv):
    opts = Options()
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, sep, inline = arg.partition("=")
        value = inline if sep else None
        if name in ("-v", "--version"):
            sys.stdout.write("DCGM Exporter version %s\n" % exporter_version())
            return 0
        if name in ("-h", "--help"):
            sys.stdout.write("NAME:\n   DCGM Exporter - Generates GPU metrics in the prometheus format\n\n"
                             "USAGE:\n   dcgm-exporter [global options]\n")
            return 0
        if name in ("-n", "--no-hostname"):
            opts.no_hostname = True
        elif name in IGNORED_BOOL_FLAGS:
            if name in ("-k", "--kubernetes"):
                opts.kubernetes = True
        elif name in VALUE_FLAGS or name in IGNORED_VALUE_FLAGS:
            if value is None:
                if not args:
                    sys.stderr.write("Incorrect Usage: flag needs an argument: %s\n" % name)
                    return 1
                value = args.pop(0)
            if name in VALUE_FLAGS:
                setattr(opts, VALUE_FLAGS[name], value)
        else:
            sys.stderr.write("Incorrect Usage: flag provided but not defined: %s\n" % name)
            return 1
    if not str(opts.interval).isdigit():
        sys.stderr.write('Incorrect Usage: invalid value "%s" for flag -c: parse error\n' % opts.interval)
        return 1
    return opts


# --- samples -------------------------------------------------------------------------

class Source(object):
    """Where snapshots come from: the remote host engine or an embedded one."""

    def __init__(self, remote):
        self.remote = remote
        self.address = proto.parse_address(remote) if remote else None
        self.client = None
        self.lock = threading.Lock()

    def connect(self):
        if self.address is None:
            return gpu_info.driver_problem() is None
        self.client = proto.open_client(self.address)
        return self.client is not None

    def snapshot(self):
        if self.address is None:
            return dcgm_fields.snapshot()
        with self.lock:
            for _attempt in (1, 2):
                if self.client is None:
                    self.client = proto.open_client(self.address)
                if self.client is None:
                    break
                try:
                    reply = self.client.call("snapshot")
                except (OSError, ValueError):
                    self.client.close()
                    self.client = None
                    continue
                if reply.get("status") == proto.ST_OK:
                    return reply
                break
        raise OSError(proto.error_string(proto.ST_CONNECTION_NOT_VALID))


def _format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "%f" % value
    return None


def _label_text(pairs):
    return ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
                    for k, v in pairs)


def render_metrics(counters, data, hostname):
    host = dict(data)
    host["gpu_count"] = len(data["gpus"])
    label_counters = [c for c in counters if c.is_label]
    out = []
    for counter in counters:
        if counter.is_label:
            continue
        getter = dcgm_fields.FIELDS.get(counter.name) or dcgm_fields.EXPORTER_FIELDS[counter.name]
        lines = []
        for snap in data["gpus"]:
            for entity_labels, entity in _entities(snap):
                value = _format_value(getter(entity, host))
                if value is None:
                    continue
                labels = entity_labels
                if hostname:
                    labels = labels + [("Hostname", hostname)]
                for label in label_counters:
                    label_value = dcgm_fields.FIELDS.get(label.name, lambda s, h: None)(snap, host)
                    if label_value is not None:
                        labels = labels + [(label.name, label_value)]
                lines.append("%s{%s} %s" % (counter.name, _label_text(labels), value))
        if lines:
            out.append("# HELP %s %s" % (counter.name, counter.help))
            out.append("# TYPE %s %s" % (counter.name, counter.prom_type))
            out.extend(lines)
    return "\n".join(out) + ("\n" if out else "")


def _entities(snap):
    """(labels, values) per monitored entity: the GPU, or its GPU instances in MIG mode."""
    base = [("gpu", str(snap["index"])), ("UUID", snap["uuid"]), ("pci_bus_id", snap["bus_id"]),
            ("device", "nvidia%d" % snap["minor_number"]), ("modelName", snap["name"])]
    if snap.get("mig_mode") and snap.get("mig_instances"):
        for gi in snap["mig_instances"]:
            values = dict(snap, fb_used=gi["fb_used"],
                          fb_free=max(0, gi["fb_total"] - gi["fb_used"]), fb_total=gi["fb_total"])
            yield base + [("GPU_I_PROFILE", gi["profile"]), ("GPU_I_ID", str(gi["gi_id"]))], values
    else:
        yield base, snap


# --- HTTP ----------------------------------------------------------------------------

LANDING_PAGE = ("<html>\n<head><title>GPU Exporter</title></head>\n<body>\n<h1>GPU Exporter</h1>\n"
                "<p><a href=\"./metrics\">Metrics</a></p>\n</body>\n</html>\n")


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6

    def server_bind(self):
        try:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        except (AttributeError, OSError):
            pass
        HTTPServer.server_bind(self)


class _Handler(BaseHTTPRequestHandler):
    server_version = "dcgm-exporter"
    sys_version = ""

    def log_message(self, fmt, *args):
        return

    def _authorised(self):
        users = self.server.web.users if self.server.web else {}
        if not users:
            return True
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _unused, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = users.get(user)
        return hashed is not None and config.check_password(password, hashed)

    def _send(self, status, body, content_type="text/plain; charset=utf-8", extra=None):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        if not self._authorised():
            self._send(401, "Unauthorized\n", extra={"WWW-Authenticate": "Basic"})
            return
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.server.exporter.metrics(),
                       "text/plain; version=0.0.4; charset=utf-8; escaping=underscores")
        elif path == "/health":
            self._send(200, "OK")
        elif path == "/":
            self._send(200, LANDING_PAGE, "text/html; charset=UTF-8")
        else:
            self._send(404, "404 page not found\n")

    do_HEAD = do_GET


class Exporter(object):
    def __init__(self, opts, counters, source, web):
        self.opts = opts
        self.counters = counters
        self.source = source
        self.web = web
        self.hostname = None if opts.no_hostname else socket.gethostname()
        self.last = ""
        self.lock = threading.Lock()

    def metrics(self):
        try:
            text = render_metrics(self.counters, self.source.snapshot(), self.hostname)
        except (OSError, env.SimError) as exc:
            log("ERROR", "Failed to collect metrics", error=str(exc))
            return self.last
        with self.lock:
            self.last = text
        return text

    def serve(self):
        host, _unused, port = self.opts.address.rpartition(":")
        host = host.strip("[]")
        if not port.isdigit():
            log("ERROR", "listen tcp: address %s: missing port in address" % self.opts.address)
            return 1
        server_class = _Server6 if (":" in host or host in ("", "::")) else _Server
        bind_host = host or "::"
        try:
            server = server_class((bind_host, int(port)), _Handler)
        except OSError as exc:
            if not host:
                try:
                    server = _Server(("0.0.0.0", int(port)), _Handler)
                except OSError as second:
                    exc = second
                    server = None
            else:
                server = None
            if server is None:
                log("ERROR", "Failed to start metrics server",
                    err="listen tcp %s: bind: %s" % (self.opts.address, (exc.strerror or str(exc)).lower()))
                return 1
        if self.web and self.web.tls:
            try:
                server.socket = self.web.ssl_context().wrap_socket(server.socket, server_side=True)
            except config.ConfigError as exc:
                log("ERROR", str(exc))
                server.server_close()
                return 1
        server.exporter = self
        server.web = self.web
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                  name="metrics-http")
        thread.daemon = True
        thread.start()
        shown = "[::]:%s" % port if not host else self.opts.address
        log("INFO", "Listening on", address=shown)
        if self.web and self.web.tls:
            log("INFO", "TLS is enabled.", http2="true", address=shown)
        else:
            log("INFO", "TLS is disabled.", http2="false", address=shown)
        signum = daemon.wait_for_termination()
        log("INFO", "Received signal", signal=_signal_name(signum))
        log("INFO", "Shutting down gracefully...")
        server.shutdown()
        server.server_close()
        log("INFO", "Shutdown complete")
        return 0


def _signal_name(signum):
    return {2: "interrupt", 3: "quit", 15: "terminated"}.get(signum, str(signum))


def main(argv=None):
    argv = sys.argv if argv is None else argv
    env.log_call(PROG, argv[1:])
    opts = parse(argv[1:])
    if isinstance(opts, int):
        return opts
    daemon.block_termination_signals()
    log("INFO", "Starting dcgm-exporter", Version=exporter_version())
    source = Source(opts.remote)
    if opts.remote:
        log("INFO", "Attempting to connect to remote hostengine at " + opts.remote)
        if not source.connect():
            log("ERROR", "Failed to connect to remote hostengine", mode="standalone", address=opts.remote,
                error="error connecting to nv-hostengine: "
                      + proto.error_string(proto.ST_CONNECTION_NOT_VALID))
            return 1
    else:
        log("INFO", "Attempting to initialize DCGM.")
        if not source.connect():
            log("ERROR", "Failed to initialize DCGM", mode="embedded",
                error="error initializing DCGM: Failed to initialize NVML")
            return 1
    log("INFO", "DCGM successfully initialized!")
    log("INFO", "Collecting DCP Metrics")
    log("INFO", "Falling back to metric file '%s'" % opts.collectors)
    try:
        counters = config.read_counters(opts.collectors)
    except config.ConfigError as exc:
        log("ERROR", str(exc))
        return 1
    web = None
    if opts.web_config:
        try:
            web = config.read_web_config(opts.web_config)
        except config.ConfigError as exc:
            log("ERROR", "Failed to read web config", err=str(exc))
            return 1
        if web.users and not config.bcrypt_supported():
            log("WARN", "bcrypt is not supported by this system's crypt(3); basic auth will reject "
                        "every request")
    log("INFO", "Initializing system entities of type 'GPU'")
    log("INFO", "Starting webserver")
    return Exporter(opts, counters, source, web).serve()
