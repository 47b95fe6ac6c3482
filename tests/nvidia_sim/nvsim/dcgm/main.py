# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Simulated DCGM 4: ``nv-hostengine`` and ``dcgmi`` (test double).

The host engine really listens (TCP, default 127.0.0.1:5555, or a Unix
socket with ``-d``), keeps health watches in memory like the real one, runs
diagnostics and serves field snapshots to ``dcgm-exporter``.  It refuses to
start when NVML cannot initialise (no kernel module, or userspace and kernel
module versions differ).  ``dcgmi`` is a client of that engine and prints the
real tables; it fails with the real messages when no engine answers.
"""

import json
import os
import pwd
import signal
import socket
import socketserver
import sys
import threading
import time

from nvsim import daemon
from nvsim import env
from nvsim import gpus as gpu_info
from nvsim.dcgm import diag as dcgm_diag
from nvsim.dcgm import fields as dcgm_fields
from nvsim.dcgm import proto
from nvsim.dcgm import render

# dcgmHealthSystems_t bits and the labels `dcgmi health -f` shows for them.
WATCH_PCIE = 0x1
WATCH_NVLINK = 0x2
WATCH_MEM = 0x10
WATCH_SM = 0x20
WATCH_INFOROM = 0x40
WATCH_THERMAL = 0x80
WATCH_POWER = 0x100
WATCH_DRIVER = 0x200
WATCH_NVSWITCH_NONFATAL = 0x400
WATCH_NVSWITCH_FATAL = 0x800
WATCH_LABELS = (
    (WATCH_PCIE, "PCIe"), (WATCH_NVLINK, "NVLINK"), (WATCH_MEM, "Memory"), (WATCH_SM, "SM"),
    (WATCH_INFOROM, "InfoROM"), (WATCH_THERMAL, "Thermal"), (WATCH_POWER, "Power"),
    (WATCH_DRIVER, "Driver"), (WATCH_NVSWITCH_NONFATAL, "NvSwitch NF"),
    (WATCH_NVSWITCH_FATAL, "NvSwitch F"),
)
SYSTEM_NAMES = {
    "pcie": "PCIe system", "nvlink": "NVLINK system", "memory": "Memory system",
    "sm": "SM system", "inforom": "InfoROM system", "thermal": "Thermal system",
    "power": "Power system", "driver": "Driver",
}
HEALTH_ORDER = {"Healthy": 0, "Warning": 1, "Failure": 2}


# --- the engine ----------------------------------------------------------------

class Engine(object):
    """Request handlers of the simulated host engine (state lives in memory)."""

    def __init__(self, version):
        self.version = version
        self.lock = threading.Lock()
        self.watches = {}

    def handle(self, request):
        op = request.get("op")
        handler = getattr(self, "op_" + str(op), None)
        if handler is None:
            return {"status": proto.ST_NOT_SUPPORTED}
        try:
            return handler(request)
        except env.SimError as exc:
            return {"status": proto.ST_GENERIC_ERROR, "message": str(exc)}

    @staticmethod
    def _group(request):
        group = request.get("group")
        if group in (None, "", "g", proto.GROUP_ALL_GPUS, str(proto.GROUP_ALL_GPUS)):
            return proto.GROUP_ALL_GPUS
        if group in (proto.GROUP_ALL_NVSWITCHES, str(proto.GROUP_ALL_NVSWITCHES)):
            return proto.GROUP_ALL_NVSWITCHES
        return None

    def op_hello(self, request):
        return {"status": proto.ST_OK, "version": self.version}

    def op_discovery(self, request):
        devices = [{"id": gpu.index, "name": gpu.model["product_name"], "bus_id": gpu.bus_id,
                    "uuid": gpu.uuid} for gpu in gpu_info.load_gpus()]
        switches = list(range(len(gpu_info.nvswitch_devices())))
        return {"status": proto.ST_OK, "gpus": devices, "switches": switches}

    def op_snapshot(self, request):
        data = dcgm_fields.snapshot()
        data["status"] = proto.ST_OK
        return data

    def op_health_set(self, request):
        group = self._group(request)
        if group is None:
            return {"status": proto.ST_NOT_CONFIGURED}
        with self.lock:
            self.watches[group] = int(request.get("systems", 0))
        return {"status": proto.ST_OK}

    def op_health_get(self, request):
        group = self._group(request)
        if group is None:
            return {"status": proto.ST_NOT_CONFIGURED}
        with self.lock:
            return {"status": proto.ST_OK, "systems": self.watches.get(group, 0)}

    def op_health_check(self, request):
        group = self._group(request)
        if group is None:
            return {"status": proto.ST_NOT_CONFIGURED}
        with self.lock:
            systems = self.watches.get(group, 0)
        incidents = []
        if group == proto.GROUP_ALL_GPUS and systems:
            state = env.load_state()
            for gpu in gpu_info.load_gpus():
                for incident in env.gpu_state(state, gpu.index).get("dcgm_health_incidents") or []:
                    incidents.append({"entity": gpu.index,
                                      "system": str(incident.get("system", "memory")).lower(),
                                      "health": incident.get("health", "Warning"),
                                      "message": incident.get("message", "")})
        return {"status": proto.ST_OK, "systems": systems, "incidents": incidents}

    def op_diag(self, request):
        group = self._group(request)
        if group is None:
            return {"status": proto.ST_NOT_CONFIGURED}
        all_ids = [gpu.index for gpu in gpu_info.load_gpus()]
        ids = request.get("gpu_ids")
        if ids is None:
            ids = all_ids if group == proto.GROUP_ALL_GPUS else []
        if any(i not in all_ids for i in ids):
            return {"status": proto.ST_BADPARAM}
        try:
            result = dcgm_diag.run(str(request.get("run", "1")), ids, self.version)
        except dcgm_diag.DiagError as exc:
            return {"status": proto.ST_BADPARAM, "unknown_test": str(exc)}
        driver = env.loaded_driver_version() or ""
        result["document"] = dcgm_diag.json_document(result, driver, self.version)
        result["driver_version"] = driver
        result["status"] = proto.ST_OK
        return result


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            try:
                request = json.loads(line.decode("utf-8"))
                reply = self.server.engine.handle(request)
            except ValueError:
                reply = {"status": proto.ST_BADPARAM}
            self.wfile.write((json.dumps(reply) + "\n").encode("utf-8"))
            self.wfile.flush()


class _TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _TCP6Server(_TCPServer):
    address_family = socket.AF_INET6


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def server_bind(self):
        # Bind by basename: long test-root paths exceed sun_path's 108 bytes.
        directory, name = os.path.split(self.server_address)
        cwd = os.getcwd()
        try:
            os.chdir(directory or ".")
            self.socket.bind(name)
        finally:
            os.chdir(cwd)


# --- nv-hostengine ---------------------------------------------------------------

class EngineOptions(object):
    def __init__(self):
        self.daemonize = True
        self.port = proto.DEFAULT_PORT
        self.bind = "127.0.0.1"
        self.socket_path = None
        self.pid_file = env.HOSTENGINE_PID_FILE
        self.log_level = None
        self.log_file = env.HOSTENGINE_LOG_FILE
        self.service_account = None
        self.terminate = False


ENGINE_VALUE_OPTIONS = {
    "-p": "port", "--port": "port", "-b": "bind", "--bind-interface": "bind",
    "--pid": "pid_file", "--log-level": "log_level", "-f": "log_file", "--log-filename": "log_file",
    "--service-account": "service_account", "--blacklist-modules": None, "--denylist-modules": None,
    "--home-dir": None,
}


def _parse_engine(argv):
    opts = EngineOptions()
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, has_inline, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in ("-n", "--no-daemon"):
            opts.daemonize = False
        elif name in ("-t", "--term"):
            opts.terminate = True
        elif name in ("--log-rotate",):
            pass
        elif name in ("-d", "--domain-socket"):
            # Optional value: a following option is not taken as the path.
            if has_inline:
                opts.socket_path = inline
            elif args and not args[0].startswith("-"):
                opts.socket_path = args.pop(0)
            else:
                opts.socket_path = proto.DEFAULT_SOCKET
        elif name in ("--version",):
            sys.stdout.write("\nnv-hostengine version: %s\n\n" % proto.dcgm_version())
            return 0
        elif name in ("-h", "--help"):
            sys.stdout.write(_engine_help())
            return 0
        elif name in ENGINE_VALUE_OPTIONS:
            value = inline if has_inline else (args.pop(0) if args else None)
            if value is None:
                return _engine_parse_error("Missing a value for this argument!", name)
            attr = ENGINE_VALUE_OPTIONS[name]
            if attr == "port":
                if not value.isdigit() or int(value) > 65535:
                    return _engine_parse_error("Couldn't read argument value from string '%s'" % value, name)
                opts.port = int(value)
            elif attr:
                setattr(opts, attr, value)
        else:
            return _engine_parse_error("Couldn't find match for argument", arg)
    return opts


def _engine_parse_error(message, arg):
    text = "Argument: %s\n             %s" % (arg, message)
    sys.stderr.write("nv-hostengine failed to parse command line arguments: %s\n" % text)
    return 255


def _engine_help():
    return ("\nNVIDIA Data Center GPU Manager (DCGM)\n"
            "Runs as a background process to manage GPUs on the node.\n"
            "Provides interface to address queries from DCGMI tool.\n\n"
            "  -n, --no-daemon            Tell the host engine not to daemonize on start-up\n"
            "  -p, --port PORT            Specify the port for the Host Engine\n"
            "  -b, --bind-interface IP    IP address to listen on (ALL = all interfaces; default 127.0.0.1)\n"
            "  -d, --domain-socket PATH   Listen on a Unix domain socket (default /tmp/nv-hostengine)\n"
            "      --pid FILENAME         PID file used to ensure only one instance runs\n"
            "      --log-level LEVEL      NONE, FATAL, ERROR, WARN, INFO, DEBUG\n"
            "  -f, --log-filename FILE    Log file (default /var/log/nv-hostengine.log)\n"
            "      --service-account USER Service account for unprivileged processes\n"
            "  -t, --term                 Terminates Host Engine [Best Effort]\n\n"
            "Please email cudatools@nvidia.com with any questions, bug reports, etc.\n")


class HostEngine(object):
    def __init__(self, opts):
        self.opts = opts
        self.version = proto.dcgm_version()
        self.log = daemon.Logger("nv-hostengine", gpu_info.resolve(opts.log_file))
        self.server = None
        self.thread = None
        self.pidfile = None

    def init(self):
        self.log.open()
        if self.opts.daemonize:
            self.log.notice("nv-hostengine version %s daemon started" % self.version)
        problem = gpu_info.driver_problem()
        if problem is not None:
            self.log.error("Cannot initialize the hostengine: Error: Failed to initialize NVML")
            self.log.notice("Error: DCGM failed to start embedded engine")
            raise daemon.InitError("Error: Failed to initialize NVML")
        if self.opts.service_account:
            try:
                pwd.getpwnam(self.opts.service_account)
            except KeyError:
                self.log.error("Service account %s does not exist" % self.opts.service_account)
                raise daemon.InitError("Error: DCGM failed to start embedded engine: the service account "
                                       "'%s' does not exist" % self.opts.service_account)
        self.log.notice("DCGM initialized")
        try:
            self.server = self._listen()
        except OSError as exc:
            self.log.error("Failed to start DCGM Server: %s" % exc.strerror)
            raise daemon.InitError("Err: Failed to start DCGM Server: %d" % proto.ST_GENERIC_ERROR)
        self.server.engine = Engine(self.version)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                       name="dcgm-listener")
        self.thread.daemon = True
        self.thread.start()
        self.log.notice("Host Engine Listener Started")
        if self.opts.daemonize:
            self.pidfile = gpu_info.resolve(self.opts.pid_file)
            os.makedirs(os.path.dirname(self.pidfile), exist_ok=True)
            with open(self.pidfile, "w") as handle:
                handle.write("%d\n" % os.getpid())
        if self.opts.socket_path is not None:
            return "Started host engine version %s using socket path: %s\n" % (
                self.version, self.opts.socket_path)
        return "Started host engine version %s using port number: %d\n" % (self.version, self.opts.port)

    def _listen(self):
        if self.opts.socket_path is not None:
            path = gpu_info.resolve(self.opts.socket_path)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            try:
                os.unlink(path)
            except OSError:
                pass
            return _UnixServer(path, _Handler)
        bind = self.opts.bind
        if bind in ("ALL", "all"):
            bind = "0.0.0.0"
        server_class = _TCP6Server if ":" in bind else _TCPServer
        return server_class((bind, self.opts.port), _Handler)

    def run(self):
        daemon.wait_for_termination()
        self.server.shutdown()
        self.server.server_close()
        if self.opts.socket_path is not None:
            try:
                os.unlink(gpu_info.resolve(self.opts.socket_path))
            except OSError:
                pass
        if self.pidfile:
            try:
                os.unlink(self.pidfile)
            except OSError:
                pass
        self.log.notice("nv-hostengine stopped")


def _terminate(pid_file):
    pid = daemon.read_pid(gpu_info.resolve(pid_file))
    if pid is None or not env.pid_alive(pid):
        sys.stdout.write("Unable to terminate host engine, it may not be running.\n")
        return 1
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 30
    while time.time() < deadline:
        if not env.pid_alive(pid):
            sys.stdout.write("Host engine successfully terminated.\n")
            return 0
        time.sleep(0.1)
    sys.stdout.write("Unable to terminate host engine.\n")
    return 1


def hostengine_main(argv=None):
    argv = sys.argv if argv is None else argv
    env.log_call("nv-hostengine", argv[1:])
    opts = _parse_engine(argv[1:])
    if isinstance(opts, int):
        return opts
    if os.geteuid() != 0:
        sys.stderr.write("nv-hostengine running as non-root. Some functionality will be limited.\n")
    if opts.terminate:
        return _terminate(opts.pid_file)
    if opts.daemonize:
        pid = daemon.read_pid(gpu_info.resolve(opts.pid_file))
        if pid is not None and env.pid_alive(pid):
            sys.stdout.write("Host engine already running with pid %d\n" % pid)
            return 1
    engine = HostEngine(opts)
    daemon.block_termination_signals()
    # main() returns -1 on initialisation errors: the shell sees 255.
    return daemon.detach(engine.init, engine.run, foreground=not opts.daemonize,
                         failure_status=255, stream=sys.stdout)


# --- dcgmi -----------------------------------------------------------------------

class Usage(Exception):
    pass


def _take(args, name, inline):
    if inline is not None:
        return inline
    if not args:
        raise Usage("Argument: %s\n             Missing a value for this argument!" % name)
    return args.pop(0)


def _parse_dcgmi(argv):
    """Split into (subsystem, {option: value}) with TCLAP-like rules."""
    args = list(argv)
    subsystem = None
    options = {}
    flags = {"-l": "list", "--list": "list", "-f": "fetch", "--fetch": "fetch",
             "-c": "check", "--check": "check", "--clear": "clear", "-j": "json", "--json": "json",
             "-v": "verbose", "--verbose": "verbose", "--fail-early": "fail_early"}
    values = {"--host": "host", "-g": "group", "--group": "group", "-s": "set", "--set": "set",
              "-r": "run", "--run": "run", "-i": "gpus", "--gpuList": "gpus", "--entity-id": "gpus",
              "-m": "max_keep_age", "--max-keep-age": "max_keep_age", "-u": "update_interval",
              "--update-interval": "update_interval", "-p": "parameters", "--parameters": "parameters",
              "--iterations": "iterations", "--timeout": "timeout", "--configfile": "configfile",
              "--statspath": "statspath", "--debugLogFile": "debuglog", "--debugLevel": "debuglevel"}
    while args:
        arg = args.pop(0)
        if subsystem is None and not arg.startswith("-"):
            subsystem = arg
            continue
        name, sep, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        inline = inline if sep else None
        if name in flags:
            options[flags[name]] = True
        elif name in values:
            options[values[name]] = _take(args, name, inline)
        elif subsystem is None and name in ("--version", "-v", "-h", "--help"):
            options[name] = True
        elif subsystem == "discovery" and name in ("-c", "--compute-hierarchy"):
            options["compute_hierarchy"] = True
        else:
            raise Usage("Couldn't find match for argument: %s" % arg)
    return subsystem, options


def _connect(options):
    host = options.get("host", "localhost")
    try:
        address = proto.parse_address(host)
    except ValueError as exc:
        sys.stderr.write("%s\n" % exc)
        return None, host
    client = proto.open_client(address)
    return client, host


def _connection_failure(host):
    sys.stdout.write("Error: unable to establish a connection to the specified host: %s\n" % host)
    sys.stdout.write("Error: Unable to connect to host engine. %s.\n"
                     % proto.error_string(proto.ST_CONNECTION_NOT_VALID))
    return proto.exit_status(proto.ST_CONNECTION_NOT_VALID)


def _group_arg(options):
    value = options.get("group")
    if value is None:
        return None
    if not value.isdigit():
        raise Usage("Argument: -g (--group)\n             Couldn't read argument value from string '%s'"
                    % value)
    return int(value)


def _validate(subsystem, options):
    """Reject bad arguments before connecting, as dcgmi's parser does."""
    if subsystem == "discovery" and not options.get("list"):
        raise Usage("One of the discovery options (-l, -i, -c) is required.")
    if subsystem in ("health", "diag"):
        _group_arg(options)
    if subsystem == "health":
        chosen = [k for k in ("fetch", "set", "clear", "check") if k in options]
        if len(chosen) != 1:
            raise Usage("Exactly one of -f (--fetch), -s (--set), --clear, -c (--check) is required.")
        if "set" in options:
            _watch_bits(options["set"])
    if subsystem == "diag":
        if "run" not in options:
            raise Usage("Required argument missing: run")
        _gpu_ids(options)


def _gpu_ids(options):
    if not options.get("gpus"):
        return None
    try:
        return [int(part.split(":")[-1]) for part in options["gpus"].split(",") if part.strip()]
    except ValueError:
        raise Usage("Argument: -i (--gpuList)\n             Invalid GPU list '%s'" % options["gpus"])


def _discovery(client, options):
    reply = client.call("discovery")
    if reply["status"] != proto.ST_OK:
        sys.stdout.write("Error: Cannot get GPU list from remote node. Return: %s\n"
                         % proto.error_string(reply["status"]))
        return proto.exit_status(reply["status"])
    devices = reply["gpus"]
    out = ["%d GPU%s found.\n" % (len(devices), "" if len(devices) == 1 else "s")]
    sections = [[[str(d["id"]), "Name: " + d["name"]], ["", "PCI Bus ID: " + d["bus_id"]],
                 ["", "Device UUID: " + d["uuid"]]] for d in devices]
    out.append(render.columns([(8, "GPU ID"), (70, "Device Information")], sections, True))
    switches = reply["switches"]
    out.append("%d NvSwitch%s found.\n" % (len(switches), "" if len(switches) == 1 else "es"))
    out.append(render.columns([(11, "Switch ID")], [[[str(s)]] for s in switches]))
    out.append("0 ConnectX found.\n")
    out.append(render.columns([(10, "ConnectX")], []))
    out.append("0 CPUs found.\n")
    out.append(render.columns([(8, "CPU ID"), (70, "Device Information")], [], True))
    sys.stdout.write("".join(out))
    return 0


def _watch_bits(flags):
    bits = 0
    for index, flag in enumerate(flags):
        if flag == "a":
            if len(flags) > 1:
                raise Usage("Argument: -s (--set)\n             Invalid flags detected")
            bits |= (WATCH_PCIE | WATCH_MEM | WATCH_INFOROM | WATCH_THERMAL | WATCH_POWER | WATCH_NVLINK
                     | WATCH_NVSWITCH_NONFATAL | WATCH_NVSWITCH_FATAL)
        elif flag in "pmitn" and flag not in flags[index + 1:]:
            bits |= {"p": WATCH_PCIE, "m": WATCH_MEM, "i": WATCH_INFOROM,
                     "t": WATCH_THERMAL | WATCH_POWER, "n": WATCH_NVLINK}[flag]
        else:
            raise Usage("Argument: -s (--set)\n             Invalid flags detected")
    if not bits:
        raise Usage("Argument: -s (--set)\n             No flags detected")
    return bits


def _health(client, options):
    group = _group_arg(options)
    action = [k for k in ("fetch", "set", "clear", "check") if k in options][0]
    if action in ("set", "clear"):
        systems = 0 if action == "clear" else _watch_bits(options["set"])
        reply = client.call("health_set", group=group, systems=systems)
        if reply["status"] != proto.ST_OK:
            sys.stdout.write("Error: Unable to set health watches. Return: %s\n" % _group_error(reply))
            return proto.exit_status(proto.ST_GENERIC_ERROR)
        sys.stdout.write("Health monitor systems set successfully.\n")
        return 0
    if action == "fetch":
        reply = client.call("health_get", group=group)
        if reply["status"] != proto.ST_OK:
            sys.stdout.write("Error: Unable to get health watches. Return: %s\n" % _group_error(reply))
            return proto.exit_status(proto.ST_GENERIC_ERROR)
        rows = [(label, "On" if reply["systems"] & bit else "Off") for bit, label in WATCH_LABELS]
        if options.get("json"):
            sys.stdout.write(render.styled_json({"body": {label: {"value": value} for label, value in rows}}))
        else:
            sys.stdout.write("Health monitor systems report\n")
            sys.stdout.write(render.tree(18, 70, [(render.tree_label(0, label), value) for label, value in rows]))
        return 0
    reply = client.call("health_check", group=group)
    if reply["status"] != proto.ST_OK:
        sys.stdout.write("Error: Unable to check health watches. Return: %s\n" % _group_error(reply))
        return proto.exit_status(proto.ST_GENERIC_ERROR)
    if not reply["systems"]:
        sys.stdout.write("Error: Health watches not enabled. Please enable watches. \n")
        return proto.exit_status(proto.ST_GENERIC_ERROR)
    sys.stdout.write(_health_report(reply["incidents"], options.get("json")))
    return 0


def _group_error(reply):
    if reply["status"] == proto.ST_NOT_CONFIGURED:
        return "The Group is not found"
    return proto.error_string(reply["status"])


def _health_report(incidents, as_json):
    overall = "Healthy"
    by_gpu = {}
    for incident in incidents:
        if HEALTH_ORDER.get(incident["health"], 0) > HEALTH_ORDER[overall]:
            overall = incident["health"]
        by_gpu.setdefault(incident["entity"], []).append(incident)
    if as_json:
        body = {"Overall Health": {"value": overall}}
        if by_gpu:
            body["GPU"] = {"children": {str(gpu): {"value": _worst(items), "children": {"Errors": {
                "children": {SYSTEM_NAMES.get(i["system"], i["system"]): {"value": i["health"],
                                                                          "overflow": [i["message"]]}
                             for i in items}}}} for gpu, items in sorted(by_gpu.items())}}
        return render.styled_json({"body": body, "header": ["Health Monitor Report"]})
    rows = [(render.tree_label(0, "Overall Health"), overall)]
    if by_gpu:
        rows.append((render.tree_label(0, "GPU"), ""))
    for gpu, items in sorted(by_gpu.items()):
        rows.append((render.tree_label(1, str(gpu)), _worst(items)))
        rows.append((render.tree_label(2, "Errors"), ""))
        for incident in items:
            rows.append((render.tree_label(3, SYSTEM_NAMES.get(incident["system"], incident["system"])),
                         incident["health"]))
            message = incident["message"].replace("\n", " ")
            for start in range(0, len(message), 54):
                rows.append((render.tree_label(3, "", True), message[start:start + 54]))
    return render.tree(28, 60, rows, header="Health Monitor Report")


def _worst(items):
    return max((i["health"] for i in items), key=lambda h: HEALTH_ORDER.get(h, 0))


def _diag(client, options):
    group = _group_arg(options)
    gpu_ids = _gpu_ids(options)
    reply = client.call("diag", run=options["run"], group=group, gpu_ids=gpu_ids)
    status = reply["status"]
    if status != proto.ST_OK:
        if reply.get("unknown_test"):
            sys.stdout.write("Error: requested test '%s' was not found among possible test choices.\n"
                             % reply["unknown_test"])
        else:
            sys.stdout.write("Error: Unable to complete diagnostic for group. Return: (%d) %s.\n"
                             % (status, _group_error(reply)))
        return proto.exit_status(status)
    if options.get("json"):
        sys.stdout.write(render.styled_json(reply["document"]))
    else:
        device_ids = ", ".join(e["device_id"] for e in reply["entities"])
        metadata = [("DCGM Version", reply["document"]["metadata"]["version"]),
                    ("Driver Version Detected", reply["driver_version"]),
                    ("GPU Device IDs Detected", device_ids)]
        sys.stdout.write(render.diag_table(metadata, reply["categories"]))
    return proto.exit_status(proto.ST_NVVS_ERROR) if reply["failed"] else 0


def _usage_error(message):
    sys.stderr.write("PARSE ERROR: %s\n\nFor complete USAGE and HELP type:\n   dcgmi --help\n\n" % message)
    return 255


def dcgmi_main(argv=None):
    argv = sys.argv if argv is None else argv
    env.log_call("dcgmi", argv[1:])
    try:
        subsystem, options = _parse_dcgmi(argv[1:])
    except Usage as exc:
        return _usage_error(str(exc))
    version = proto.dcgm_version()
    if subsystem is None:
        if options.get("--version"):
            sys.stdout.write("\ndcgmi  version: %s\n\n" % version)
            return 0
        if options.get("-v") or options.get("verbose"):
            client, host = _connect(options)
            if client is None:
                return _connection_failure(host)
            remote = client.call("hello").get("version", "")
            client.close()
            sys.stdout.write("\nLocal build info:\nVersion : %s\n\nHostengine build info:\nVersion : %s\n\n"
                             % (version, remote))
            return 0
        sys.stdout.write("\n dcgmi -- Command Line Interface for the DCGM API.\n\n"
                         "Usage: dcgmi <subsystem> [options]\n"
                         "Subsystems used here: discovery, health, diag.\n\n")
        return 0
    handlers = {"discovery": _discovery, "health": _health, "diag": _diag}
    if subsystem not in handlers:
        return _usage_error("Invalid subsystem '%s'" % subsystem)
    try:
        _validate(subsystem, options)
    except Usage as exc:
        return _usage_error(str(exc))
    client, host = _connect(options)
    if client is None:
        return _connection_failure(host)
    try:
        return handlers[subsystem](client, options)
    except Usage as exc:
        return _usage_error(str(exc))
    finally:
        client.close()
