"""The package's surface: the committed type stubs are the ones nanobind's stubgen makes of the
installed module, every function, class, method and property has a docstring, help() on the
kernel says what it computes (shapes, units, the method's sections), the exceptions are
ValueError/OSError subclasses, and the README's Python example runs exactly as written.

Regenerate the stubs after changing the bindings (one .pyi per submodule of _core, in the stub
package python/attention_plasticity/_core/):
    .venv/bin/python -m nanobind.stubgen -r -m attention_plasticity._core -p python/stubgen_patterns.txt \
        -O python/attention_plasticity
Run: .venv/bin/python -m pytest -q tests/python/test_bindings_api.py
"""

import inspect
import os
import pydoc
import re
import subprocess
import sys

import bindings_util as bu
import attention_plasticity as ap

STUBS = os.path.join(bu.ROOT, "python", "attention_plasticity", "_core")
PARTS = ("kernel", "steps", "extensions", "head", "dump", "companion", "tables")


def stub_files(folder):
    return {name: open(os.path.join(folder, name)).read()
            for name in sorted(os.listdir(folder)) if name.endswith(".pyi")}


def test_the_committed_stubs_are_current(tmp_path):
    bu.check_run([sys.executable, "-m", "nanobind.stubgen", "-r", "-q", "-m", "attention_plasticity._core",
                  "-p", os.path.join(bu.ROOT, "python", "stubgen_patterns.txt"), "-O", tmp_path])
    made = stub_files(tmp_path / "_core")
    assert sorted(made) == sorted(["__init__.pyi"] + [p + ".pyi" for p in PARTS])  # no stub of _bench
    assert stub_files(STUBS) == made, (
        "python/attention_plasticity/_core/*.pyi are out of date; regenerate them with\n"
        "  .venv/bin/python -m nanobind.stubgen -r -m attention_plasticity._core -p python/stubgen_patterns.txt"
        " -O python/attention_plasticity")
    installed = os.path.dirname(ap.__file__)  # the package ships every stub
    assert sorted(stub_files(os.path.join(installed, "_core"))) == sorted(made)
    assert os.path.exists(os.path.join(installed, "py.typed"))


def test_each_part_is_a_module_of_its_own():
    """The parts import as their stubs name them, the package's submodules of the method's parts
    re-export their public names, and the benchmark hooks are in no public part."""
    import importlib
    exported = set()
    for part in PARTS:
        module = importlib.import_module("attention_plasticity._core." + part)
        assert module is getattr(ap._core, part)
        public = {n for n in vars(module) if not n.startswith("_")}
        # the package's submodule of the part re-exports them (ap.kernel, ap.steps, ap.extensions)
        home = getattr(ap, part) if part in ("kernel", "steps", "extensions") else module
        assert public and all(getattr(home, n) is getattr(module, n) for n in public), part
        assert not public & exported, part  # each name has one home
        exported |= public
    from attention_plasticity._core import _bench
    assert {"analyze_head_seconds", "blas_library", "read_address"} <= set(vars(_bench))
    assert not any(hasattr(ap, n) or hasattr(ap, "_" + n) for n in ("analyze_head_seconds", "blas_library",
                                                                     "read_address"))


def documented(doc, name):
    """The text of a docstring beyond nanobind's signature line."""
    doc = (doc or "").strip()
    if doc.startswith(name + "(") or doc.startswith("(self"):
        doc = doc.split("\n", 1)[1] if "\n" in doc else ""
    return doc.strip()


def public_names():
    """(name, object) of the top level and of every public part of _core (the curated top level
    holds only the entry points; the steps, kernels and internals are in the parts)."""
    import importlib
    out = [(name, getattr(ap, name)) for name in dir(ap)]
    for part in PARTS:
        module = importlib.import_module("attention_plasticity._core." + part)
        out += [(name, value) for name, value in vars(module).items() if not name.startswith("_")]
    return out


def test_every_public_name_has_a_docstring():
    missing = []
    for name, obj in public_names():
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        if isinstance(obj, type):
            if not documented(obj.__doc__, name):
                missing.append(name)
            for attr, value in vars(obj).items():
                special = attr in ("__init__", "__call__", "__len__")
                if (attr.startswith("_") and not special) or isinstance(value, type):
                    continue  # (nested types: nanobind's iterator types, made on first use)
                if callable(value) or isinstance(value, (property, staticmethod, classmethod)):
                    if not documented(getattr(value, "__doc__", None), attr):
                        missing.append(f"{name}.{attr}")
        elif callable(obj) and not documented(obj.__doc__, name):
            missing.append(name)
    assert missing == []
    assert {"analyze_dump", "analyze_head", "pair_plasticity", "orientation_signs", "subsample_rows", "fit_linear",
            "scalar_position_predictability", "householder_to_e1", "fit_position_component",
            "standardized_normality", "noise_normality", "component_weights", "query_buckets",
            "bucket_query_models", "full_gaussian", "group_key_buckets", "eligible_key_buckets",
            "cell_key_pairs", "cell_pair_seed", "pair_sampler_seed", "seeds_of_head", "query_bucket_plasticity",
            "plasticity_aggregates", "structured_pair_moments", "pair_moments_full", "key_differences",
            "sample_key_pairs", "sample_bucket_key_pairs", "ks_test_normal", "kolmogorov_sf",
            "sample_moments", "fit_gaussian"} <= {name for name, _ in public_names()}


def test_help_of_the_kernel_says_what_how_and_where():
    text = pydoc.render_doc(ap.kernel.pair_plasticity, renderer=pydoc.plaintext)
    for needed in ("pair_plasticity(differences", "4 p (1 - p)", "docs/method.md §4", "N x d", "d x d",
                   "units", "[0, 1]", "Returns an array [N]", "InvalidArgumentError", "DomainError",
                   "read in place"):
        assert needed in text, needed
    assert "analyze_head" in pydoc.render_doc(ap, renderer=pydoc.plaintext)
    dump_doc = ap.analyze_dump.__doc__
    for key, *_ in ap._core.dump.analyze_options():
        assert key in dump_doc or key in ("data_root", "output_dir"), key


def test_exception_types():
    assert issubclass(ap.InvalidArgumentError, ValueError)
    assert issubclass(ap.DomainError, ValueError)
    assert issubclass(ap.UsageError, ap.InvalidArgumentError)
    assert issubclass(ap.OutputError, OSError)
    assert ap.InvalidArgumentError.__module__ == "attention_plasticity"


def test_the_readme_example_runs_as_written(tmp_path):
    with open(os.path.join(bu.ROOT, "README.md")) as f:
        readme = f.read()
    section = readme.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    # Every other Python example of the README runs in the test of its section.
    run_elsewhere = {"Profile a model in 10 lines": "test_afternoon.py", "Compare two checkpoints": "test_afternoon.py",
                     "What the numbers mean": "test_afternoon.py",
                     "Interop: TransformerLens and nnsight": "test_capture_toolkits.py",
                     "Watch plasticity during training": "test_monitor.py",
                     "Explore a result in the browser": "test_report.py"}
    for part in readme.split("\n## ")[1:]:
        title = part.split("\n", 1)[0]
        if title != "Python" and "```python\n" in part:
            assert title in run_elsewhere, f"README section '{title}' has a Python example no test runs"
    script = tmp_path / "readme_example.py"
    script.write_text(blocks[0])
    proc = bu.check_run([sys.executable, "-W", "error::UserWarning", script], cwd=bu.ROOT)
    assert proc.stdout.startswith("AP = 0.")
    assert "HeadResult(layer=0, q_head=0, k_head=0: ap_overall=" in proc.stdout
    assert "BucketProfile(" in proc.stdout and "at 0x" not in proc.stdout
    assert "ap_overall" in proc.stdout and "q_bucket" in proc.stdout and "plasticity_corrected" in proc.stdout
    assert "ap_overall_corrected" in proc.stdout
    installs = [block.split("#")[0].strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]
    assert ".venv/bin/pip install ." in installs and "scripts/build_wheel.sh" in installs
