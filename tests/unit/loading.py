"""Where the checkout is, and how a test loads a file that is no package's
module (a harness script, a scenario's helper). For test modules outside the
top directory: under pytest's default import mode, ``from conftest import``
names whichever conftest.py was imported last (tests/unit/repo/ has one)."""
import importlib.util
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_module(path, name):
    """The module in the file at path, freshly loaded under name."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
