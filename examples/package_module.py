"""The pure-Python modules of attention_plasticity for the scripts of examples/ (and the tests):
the installed package's, or else this repository's python/attention_plasticity/<name>.py loaded
by path. The scripts then run from a checkout where the package is not installed (its
__init__ needs the compiled module; these modules do not).
"""

import importlib
import importlib.util
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(name, installed=True, reraise=()):
    """attention_plasticity.<name>: the installed one when ``installed`` and importable, else
    the repository's file. An ImportError of a module in ``reraise`` (a missing dependency,
    e.g. pyarrow) propagates instead of falling back."""
    if installed:
        try:
            return importlib.import_module("attention_plasticity." + name)
        except ImportError as exc:
            if getattr(exc, "name", None) in reraise:
                raise
    path = os.path.join(REPO_ROOT, "python", "attention_plasticity", name + ".py")
    if not os.path.isfile(path):
        raise ImportError(f"attention_plasticity.{name} is neither installed nor at {path}")
    spec = importlib.util.spec_from_file_location("attention_plasticity_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
