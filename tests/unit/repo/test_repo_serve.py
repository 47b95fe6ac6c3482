# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""serve.py: detached HTTP server of the built repositories, stop by pid file."""

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from repo_test_support import REPO_SRC

SERVE = os.path.join(REPO_SRC, "serve.py")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _serve(*args):
    return subprocess.run([sys.executable, SERVE] + list(args), universal_newlines=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, check=False)


@pytest.fixture
def server(built, tmp_path):
    port = _free_port()
    pidfile = str(tmp_path / "serve.pid")
    started = _serve("--dir", built, "--port", str(port), "--bind", "127.0.0.1", "--pidfile", pidfile)
    assert started.returncode == 0, started.stderr
    yield port, pidfile
    _serve("--stop", "--pidfile", pidfile)


def test_detached_server_serves_the_mirror(server, built):
    port, pidfile = server
    with open(pidfile) as handle:
        pid = int(handle.read())
    assert pid != os.getpid() and _alive(pid)
    url = "http://127.0.0.1:%d" % port
    with urllib.request.urlopen(url + "/keys/fingerprint", timeout=10) as response:
        with open(os.path.join(built, "keys", "fingerprint"), "rb") as handle:
            assert response.read() == handle.read()
    with urllib.request.urlopen(url + "/compute/cuda/repos/debian13/x86_64/InRelease", timeout=10) as response:
        assert response.read().startswith(b"-----BEGIN PGP SIGNED MESSAGE-----")


def test_busy_port_fails_and_stop_ends_the_server(server, built):
    port, pidfile = server
    with open(pidfile) as handle:
        pid = int(handle.read())
    busy = _serve("--dir", built, "--port", str(port), "--pidfile", pidfile + ".2")
    assert busy.returncode == 1
    assert "cannot listen on 127.0.0.1:%d" % port in busy.stderr
    assert _serve("--stop", "--pidfile", pidfile).returncode == 0
    deadline = time.time() + 5
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert not os.path.exists(pidfile)
