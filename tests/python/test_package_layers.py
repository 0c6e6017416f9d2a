"""The Python package's layer lines and its public surface (issue 26, items 4 and 5):

- the compiled module ``_core`` imports nothing of the package it sits in (the reprs, ``to_dict``
  and ``HeadResult.tables`` are attached by ``attention_plasticity.results`` at import), so it
  loads and works alone;
- the package's modules import each other without a cycle;
- the top level (``ap.__all__``, ``dir(ap)``) is the curated list of entry points, result types
  and errors, and every name the top level had before (tests/python/former_top_level_names.txt)
  still resolves to the same object, with a DeprecationWarning naming its new path (issue 34);
- the project's own code, examples, docs and tests use none of those former names.

Run: .venv/bin/python -m pytest -q tests/python/test_package_layers.py
"""

import ast
import importlib
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import bindings_util as bu
import attention_plasticity as ap

PACKAGE = os.path.dirname(ap.__file__)  # the installed package (the wheel's files)
SOURCE = os.path.join(bu.ROOT, "python", "attention_plasticity")
PARTS = ("kernel", "steps", "extensions", "head", "dump", "companion", "tables")


def test_the_compiled_module_loads_and_works_without_the_package(tmp_path):
    """_core loaded from its file alone, with every Python module of the package blocked: it
    analyzes a head, plans a dump run, prints its results with the default repr, and imports no
    module of the package (before issue 26 HeadResult's repr imported attention_plasticity.results)."""
    script = textwrap.dedent("""
        import importlib.abc, importlib.machinery, importlib.util, os, sys
        import numpy as np

        class Block(importlib.abc.MetaPathFinder):
            # Any module of the package but the compiled one: the package itself included.
            def find_spec(self, name, path=None, target=None):
                if (name == "attention_plasticity" or name.startswith("attention_plasticity.")) and \\
                        not name.startswith("attention_plasticity._core"):
                    raise ImportError("blocked: " + name)
                return None

        sys.meta_path.insert(0, Block())
        folder = sys.argv[1]  # the package's folder: the extension sits beside the stubs' folder _core/
        [file] = [f for f in os.listdir(folder)
                  if f.startswith("_core.") and f.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
        spec = importlib.util.spec_from_file_location("attention_plasticity._core", os.path.join(folder, file))
        core = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = core
        spec.loader.exec_module(core)

        rng = np.random.default_rng(0)
        position = np.tile(np.arange(200), 2)
        bucket, example_id = position // 50, np.repeat(np.arange(2), 200)
        q, k = rng.standard_normal((400, 8)), rng.standard_normal((400, 8))
        result = core.head.analyze_head(core.head.Tokens(q, position, bucket),
                                        core.head.Tokens(k, position, bucket, example_id))
        assert np.isfinite(result.metrics.ap_overall)
        for thing in (result, result.metrics, result.profile[0], core.steps.HeadId(1, 2, 3)):
            assert repr(thing), thing  # the repr of the type (or of object) without the package
        assert "HeadResult(" not in repr(result)  # the package's repr is the package's
        assert sorted(core.tables.result_columns([result])) == sorted(t[0] for t in core.tables.result_tables())
        # a Parquet folder weighed by its footer without the package (pyarrow, not attention_plasticity.dump)
        import pyarrow as pa, pyarrow.parquet as pq
        dump = os.path.join(sys.argv[2], "dump")
        for kind in "qk":
            os.makedirs(os.path.join(dump, "l00h00" + kind))
            pq.write_table(pa.table({"x": list(range(7))}), os.path.join(dump, "l00h00" + kind, "data.parquet"))
        run = core.dump.DumpRun.from_options(dump, None, None,
                                              {"num_layers": 1, "num_q_heads": 1, "num_k_heads": 1})
        assert run.heads == [(0, 0, 0)], run.heads
        run.close()
        loaded = sorted(n for n in sys.modules if n.split(".")[0] == "attention_plasticity")
        assert all(n.startswith("attention_plasticity._core") for n in loaded), loaded
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script, PACKAGE, str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_package_reprs_and_to_dict_are_attached_at_import():
    """What the compiled module used to attach is there for users, from the package."""
    from attention_plasticity import results
    assert ap.HeadResult.__repr__ is results._head_result_repr
    assert ap.HeadResult.to_dict is results._head_result_to_dict
    assert ap.HeadResult.tables is results._head_result_tables
    assert ap.HeadMetrics.__repr__ is results._repr and ap.HeadMetrics.to_dict is results._to_dict
    assert ap.steps.HeadId.__repr__ is not results._repr  # a repr of its own (C++) is kept
    assert repr(ap.HeadId(1, 2, 3)) == "HeadId(layer=1, q_head=2, k_head=3)"


def module_name(path):
    parts = os.path.relpath(path, os.path.dirname(SOURCE))[:-len(".py")].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name, modules):
    """A Python module of the package, or its compiled module's folder (attention_plasticity._core)."""
    return name in modules or os.path.isdir(os.path.join(os.path.dirname(SOURCE), *name.split(".")))


def package_imports():
    """{module: {(imported module, lazy)}} of python/attention_plasticity/**/*.py, read with ast.

    Every `import` and `from ... import` is counted, at the top level and inside functions
    ("lazy": deferred to the call; a cycle through one is still a cycle, only one that does not
    break the import, so it is reported as well: the graph is to be acyclic either way).
    `from . import x` counts x when x is a module of the package, else the package itself. The
    compiled module is a leaf (it imports nothing of the package: the test above), and the
    implicit import of a parent package by its submodules is not an edge (Python's own order)."""
    modules = {}
    for folder, _dirs, files in os.walk(SOURCE):
        for f in files:
            if f.endswith(".py"):
                modules[module_name(os.path.join(folder, f))] = os.path.join(folder, f)
    graph = {}
    for name, path in modules.items():
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        top = {id(node) for node in tree.body}
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{target}.{a.name}" if is_module(f"{target}.{a.name}", modules) else target
                           for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != name:
                    edges.add((target, id(node) not in top))
        graph[name] = edges
    return graph


def test_the_package_has_no_import_cycle():
    graph = package_imports()
    assert ("attention_plasticity.results", False) in graph["attention_plasticity.dump"]  # the reader works
    assert len(graph) >= 15
    cycles = []

    def visit(node, path):
        for target, _lazy in sorted(graph[node]):
            if target in path:
                cycles.append(path[path.index(target):] + [target])
            elif target not in done:
                visit(target, path + [target])
        done.add(node)

    done = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    # The package's __init__ imports its modules; a module importing the package's __init__ back
    # (`from .. import x` of a name of __init__) would be the cycle this finds.
    assert cycles == [], cycles


def former_top_level():
    """Each former top-level name and the object it was (as the old __init__ imported it)."""
    capture, compare, dump, interop, profile, result_set, results = (
        importlib.import_module("attention_plasticity." + m)
        for m in ("capture", "compare", "dump", "interop", "profile", "result_set", "results"))
    names = fixture_names("former_top_level_names.txt")
    before = {n: getattr(ap._core, n) for n in ("DomainError", "InvalidArgumentError", "OutputError", "UsageError")}
    for part in PARTS:  # star-imported, in this order
        module = importlib.import_module("attention_plasticity._core." + part)
        before.update({n: getattr(module, n) for n in vars(module) if not n.startswith("_")})
    for module, imported in ((capture, ["CaptureError"]),
                             (profile, ["ModelProfile", "notebook_capture", "profile_model", "profile_vectors"]),
                             (interop, ["from_activation_cache", "from_nnsight_inputs"]),
                             (dump, ["DumpResult", "HeadError", "HeadFailedWarning", "analyze_dump"]),
                             (results, ["NaNColumnWarning", "nan_reasons", "tables"]),
                             (result_set, ["ResultSet", "analysis_options", "read_results", "result_set"]),
                             (compare, ["CompareResult", "compare_runs"])):
        before.update({n: getattr(module, n) for n in imported})
    for module in ("capture", "compare", "dump", "interop", "layout", "profile", "qk_sniffer", "results"):
        before[module] = importlib.import_module("attention_plasticity." + module)
    return names, before


# The new path of a former top-level name: the public submodule of the method's parts, else the
# compiled module's part (the engine's internals).
NEW_HOMES = {"kernel": "kernel", "steps": "steps", "extensions": "extensions", "head": "_core.head",
             "dump": "_core.dump", "companion": "_core.companion", "tables": "_core.tables"}


def deprecated_names():
    """{former top-level name: its new path} of the names no longer at the top level (the
    curated ones are there; the package's modules are attributes of the package, no names)."""
    names, before = former_top_level()
    out = {}
    for name in names:
        if name in CURATED or isinstance(before[name], type(ap)):
            continue
        part = next(p for p in PARTS if name in vars(getattr(ap._core, p)))
        out[name] = f"attention_plasticity.{NEW_HOMES[part]}.{name}"
    return out


def test_every_former_top_level_name_still_resolves_to_the_same_object():
    names, before = former_top_level()
    assert len(names) == 155 and sorted(before) == sorted(names)
    deprecated = deprecated_names()
    assert len(deprecated) == 105
    for name in names:
        if name in deprecated:
            # twice: a warning at every access (the name is not cached at the top level)
            for _ in range(2):
                with pytest.warns(DeprecationWarning) as caught:
                    value = getattr(ap, name)
                assert [str(w.message) for w in caught] == [
                    f"attention_plasticity.{name} is deprecated; use {deprecated[name]}"], name
                assert caught[0].filename == __file__  # the caller's line (stacklevel)
            assert value is before[name], name
            # the new path is the same object
            module, _, attr = deprecated[name].rpartition(".")
            assert getattr(importlib.import_module(module), attr) is value, name
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the curated names and the modules: silently
                assert getattr(ap, name) is before[name], name
    namespace = {}
    with pytest.warns(DeprecationWarning) as caught:
        exec("from attention_plasticity import pair_plasticity, DumpRun, analyze_options, result_tables", namespace)
    assert "attention_plasticity.DumpRun is deprecated; use attention_plasticity._core.dump.DumpRun" in [
        str(w.message) for w in caught]
    assert len(caught) == 4 and all(w.filename == "<string>" for w in caught)  # once each, at the import
    assert namespace["DumpRun"] is ap._core.dump.DumpRun
    assert not hasattr(ap, "no_such_name") and not hasattr(ap, "analyze_head_seconds")
    assert "pair_plasticity" not in vars(ap)


def python_of_markdown(text):
    """The code of a markdown text's ```python blocks."""
    return "\n".join(re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M))


def former_uses(code, deprecated):
    """The former names `code` uses: ap.NAME / attention_plasticity.NAME (but not x.ap.NAME) and
    `from attention_plasticity import NAME`."""
    names = "|".join(sorted(deprecated, key=len, reverse=True))
    found = re.findall(r"(?<![\w.])(?:ap|attention_plasticity)\.(" + names + r")\b", code)
    for imported in re.findall(r"from attention_plasticity import \(?([\w\s,]+)", code):
        found += [n.strip() for n in imported.split(",") if n.strip() in deprecated]
    return found


def test_the_project_uses_no_former_name():
    """The package's modules, its examples, benchmarks and scripts, the Python of README.md and
    docs/*.md, and the tests use the curated names only (the pytest runs turn this warning into an
    error too: pyproject.toml's filterwarnings). This file and the package's __init__ name some on
    purpose (the warning's own test and its docstring)."""
    deprecated = deprecated_names()
    assert former_uses("x = ap.pair_plasticity(w)\nfrom attention_plasticity import (DumpRun,\n Tokens)",
                       deprecated) == ["pair_plasticity", "DumpRun"]  # the scan sees them
    assert former_uses("ap.kernel.pair_plasticity; ap._core.dump.DumpRun; ap.HeadOptions", deprecated) == []
    here = os.path.abspath(__file__)
    uses = {}
    for folder in ("python", "examples", "benchmarks", "scripts", "tests", "docs"):
        for root, _dirs, files in os.walk(os.path.join(bu.ROOT, folder)):
            for f in files:
                path = os.path.join(root, f)
                if path == here or path == os.path.join(SOURCE, "__init__.py"):
                    continue
                if f.endswith((".py", ".pyi")):
                    with open(path, encoding="utf-8") as handle:
                        code = handle.read()
                elif f.endswith(".md"):
                    with open(path, encoding="utf-8") as handle:
                        code = python_of_markdown(handle.read())
                else:
                    continue
                if former_uses(code, deprecated):
                    uses[os.path.relpath(path, bu.ROOT)] = former_uses(code, deprecated)
    with open(os.path.join(bu.ROOT, "README.md"), encoding="utf-8") as handle:
        readme = python_of_markdown(handle.read())
    assert "ap.kernel.pair_plasticity" in readme  # the README's example is scanned
    if former_uses(readme, deprecated):
        uses["README.md"] = former_uses(readme, deprecated)
    assert uses == {}, uses


def test_the_package_imports_with_former_names_an_error():
    """The package itself, imported and used with the warning an error, uses none at run time."""
    script = ("import warnings; warnings.filterwarnings('error', category=DeprecationWarning, "
              "message='attention_plasticity'); import attention_plasticity as ap, attention_plasticity.plots; "
              "import attention_plasticity.capture, attention_plasticity.sniffed; ap.analysis_options(seed=1); "
              "print(ap.kernel.pair_plasticity is ap._core.kernel.pair_plasticity)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr


def fixture_names(file):
    with open(os.path.join(os.path.dirname(__file__), file)) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


CURATED = fixture_names("curated_top_level_names.txt")
SUBMODULES = ["steps", "kernel", "extensions", "plots", "capture", "qk_sniffer", "sniffed", "integrations"]


def test_the_top_level_is_the_curated_list():
    assert ap.__all__ == CURATED
    assert dir(ap) == sorted(CURATED + SUBMODULES)
    for name in SUBMODULES:
        assert getattr(ap, name) is importlib.import_module("attention_plasticity." + name), name
    # the steps and the kernel are in their submodules, the engine's internals only in _core
    assert ap.steps.fit_linear is ap._core.steps.fit_linear and ap.kernel.pair_plasticity is ap._core.kernel.pair_plasticity
    assert ap.extensions.plasticity_interval is ap._core.extensions.plasticity_interval
    for internal in ("DumpRun", "analyze_options", "result_tables", "result_columns", "analyze_default_options"):
        assert internal not in dir(ap) and internal not in ap.__all__
    star = {}
    exec("from attention_plasticity import *", star)
    assert sorted(n for n in star if n != "__builtins__") == sorted(CURATED)


def test_a_star_import_does_not_load_the_plots():
    proc = subprocess.run([sys.executable, "-c", "from attention_plasticity import *; import sys; "
                           "print('attention_plasticity.plots' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr
