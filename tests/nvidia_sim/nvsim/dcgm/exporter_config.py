# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inputs of the simulated dcgm-exporter: counters CSV and web config (test double).

The counters file is read like the real exporter reads it (Go's CSV reader
with ``#`` comments, then three trimmed fields per record) and rejected with
its messages.  The web configuration follows the Prometheus exporter-toolkit
format: ``tls_server_config`` (``cert_file``, ``key_file``) and
``basic_auth_users`` (bcrypt hashes, checked with the system's crypt(3), which
on glibc/libxcrypt systems understands ``$2a$``/``$2b$``/``$2y$``).
"""

import csv
import ctypes
import ctypes.util
import io
import os
import ssl

from nvsim import gpus as gpu_info
from nvsim import yaml_lite
from nvsim.dcgm import fields as dcgm_fields

PROMETHEUS_TYPES = ("gauge", "counter", "histogram", "summary", "label")
WEB_CONFIG_KEYS = ("tls_server_config", "http_server_config", "basic_auth_users")


class ConfigError(Exception):
    pass


class Counter(object):
    def __init__(self, name, prom_type, help_text):
        self.name = name
        self.prom_type = prom_type
        self.help = help_text

    @property
    def is_label(self):
        return self.prom_type == "label"


def read_counters(path):
    """Counters of a CSV file; raises ConfigError with the exporter's message."""
    try:
        with open(gpu_info.resolve(path), newline="") as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        raise ConfigError("Could not read metrics file '%s'; err: open %s: %s"
                          % (path, path, (exc.strerror or str(exc)).lower()))
    records = []
    expected = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        record = next(csv.reader(io.StringIO(line), skipinitialspace=False))
        if expected is None:
            expected = len(record)
        elif len(record) != expected:
            raise ConfigError("Could not read metrics file '%s'; err: record on line %d: wrong number "
                              "of fields" % (path, number))
        records.append(record)
    counters = []
    for index, record in enumerate(records):
        record = [field.strip(" ") for field in record]
        if len(record) != 3:
            raise ConfigError("malformed CSV record; err: failed to parse line %d (`[%s]`), expected 3 "
                              "fields" % (index, " ".join(record)))
        name, prom_type, help_text = record
        if name not in dcgm_fields.FIELDS and name not in dcgm_fields.EXPORTER_FIELDS:
            raise ConfigError("could not find DCGM field; err: unknown ExporterCounter field '%s'" % name)
        if prom_type not in PROMETHEUS_TYPES:
            raise ConfigError("could not find Prometheus metric type '%s'" % prom_type)
        counters.append(Counter(name, prom_type, help_text))
    return counters


class WebConfig(object):
    def __init__(self):
        self.cert_file = None
        self.key_file = None
        self.users = {}

    @property
    def tls(self):
        return bool(self.cert_file)

    def ssl_context(self):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (IOError, OSError, ssl.SSLError) as exc:
            raise ConfigError("failed to load X509KeyPair: %s" % exc)
        return context


def read_web_config(path):
    try:
        with open(gpu_info.resolve(path)) as handle:
            data = yaml_lite.load(handle.read()) or {}
    except (IOError, OSError) as exc:
        raise ConfigError("open %s: %s" % (path, (exc.strerror or str(exc)).lower()))
    except yaml_lite.YamlError as exc:
        raise ConfigError("yaml: %s" % exc)
    if not isinstance(data, dict):
        raise ConfigError("yaml: unmarshal errors: cannot unmarshal into web.Config")
    for key in data:
        if key not in WEB_CONFIG_KEYS:
            raise ConfigError("yaml: unmarshal errors:\n  field %s not found in type web.Config" % key)
    config = WebConfig()
    tls = data.get("tls_server_config") or {}
    if tls:
        config.cert_file = tls.get("cert_file")
        config.key_file = tls.get("key_file")
        if not config.cert_file:
            raise ConfigError("missing cert_file")
        if not config.key_file:
            raise ConfigError("missing key_file")
        base = os.path.dirname(gpu_info.resolve(path))
        config.cert_file = _relative_to(base, config.cert_file)
        config.key_file = _relative_to(base, config.key_file)
    users = data.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise ConfigError("yaml: unmarshal errors: basic_auth_users must be a mapping")
    config.users = {str(k): str(v) for k, v in users.items()}
    return config


def _relative_to(base, path):
    # exporter-toolkit resolves relative file names against the config's directory.
    if os.path.isabs(path):
        return gpu_info.resolve(path)
    return os.path.join(base, path)


_CRYPT = None


def _crypt_function():
    global _CRYPT
    if _CRYPT is None:
        name = ctypes.util.find_library("crypt") or "libcrypt.so.1"
        try:
            library = ctypes.CDLL(name)
            function = library.crypt
            function.restype = ctypes.c_char_p
            function.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            _CRYPT = function
        except (OSError, AttributeError):
            _CRYPT = False
    return _CRYPT


def bcrypt_supported():
    function = _crypt_function()
    if not function:
        return False
    probe = b"$2b$04$" + b"a" * 22
    result = function(b"probe", probe)
    return bool(result) and result.startswith(b"$2b$04$")


def check_password(password, hashed):
    function = _crypt_function()
    if not function or not hashed.startswith("$2"):
        return False
    result = function(password.encode("utf-8"), hashed.encode("utf-8"))
    return bool(result) and result.decode("ascii", "replace") == hashed
