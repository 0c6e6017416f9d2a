"""Zero copy, proven: the address the module reads is the array's own (NumPy and torch, every kind
of argument), and a 1 GB input goes through analyze_head and the kernel without the process's
peak memory growing by anything near its size. And the module's BLAS is Debian's OpenBLAS even
with NumPy's and torch's own BLAS libraries loaded (no symbol interposition): the same bits
whatever was imported first.

Run: .venv/bin/python -m pytest -q tests/python/test_bindings_memory.py
"""

import os
import resource
import subprocess
import sys

import numpy as np
import pytest
import torch

import bindings_util  # noqa: F401  (paths)
import attention_plasticity as ap
from attention_plasticity._core import _bench

MB = 1 << 20


def address(a):
    return a.data_ptr() if isinstance(a, torch.Tensor) else a.__array_interface__["data"][0]


@pytest.mark.parametrize("kind,dtype", [("float", np.float32), ("float", np.float64), ("int64", np.int64),
                                        ("real", np.int64), ("real", np.float64)])
def test_inputs_are_read_where_they_are(kind, dtype):
    base = np.arange(24, dtype=dtype).reshape(4, 6) if kind == "float" else np.arange(24, dtype=dtype)
    for x in (base, torch.from_numpy(base), base[1:]):
        got, converted = _bench.read_address(x, kind)
        assert (got, converted) == (address(x), False)


def test_read_only_arrays_are_read_in_place():
    x = np.arange(24.0).reshape(4, 6)
    x.flags.writeable = False
    assert _bench.read_address(x, "float") == (address(x), False)


@pytest.mark.parametrize("kind,make", [
    ("float", lambda: np.arange(24.0).reshape(4, 6)[:, ::2]),        # strided
    ("float", lambda: np.arange(24.0).astype(">f8")),                 # big-endian
    ("int64", lambda: np.arange(24).astype(">i8")),
    ("float", lambda: np.arange(24, dtype=np.int32)),                 # integers -> float64
    ("int64", lambda: np.arange(24, dtype=np.int32)),                 # int32 -> int64
    ("float", lambda: torch.arange(24.0).reshape(4, 6).t()),          # transposed tensor
])
def test_other_layouts_are_converted_once(kind, make):
    x = make()
    got, converted = _bench.read_address(x, kind)
    assert converted and got != address(x)


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB


def test_a_1gb_input_is_not_copied():
    n, d = 1 << 21, 128  # 2,097,152 x 128 float32 = 1 GiB
    rng = np.random.default_rng(0)
    vectors = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, 1 << 17):
        vectors[start:start + (1 << 17)] = rng.standard_normal((1 << 17, d), dtype=np.float32)
    position = np.tile(np.arange(1 << 14, dtype=np.int64), n >> 14)
    bucket = position >> 11
    example_id = np.repeat(np.arange(n >> 14, dtype=np.int64), 1 << 14)
    assert vectors.nbytes == 1 << 30
    for framework in ("numpy", "torch"):
        arrays = [vectors, position, bucket, example_id]
        if framework == "torch":
            arrays = [torch.from_numpy(a) for a in arrays]
        queries = ap.Tokens(arrays[0], arrays[1], arrays[2])
        keys = ap.Tokens(*arrays)
        assert queries.converted_columns() == [] and keys.converted_columns() == []
        before = peak_rss_bytes()
        result = ap.analyze_head(queries, keys, options=ap.HeadOptions(num_pairs_per_bucket=64))
        grown = peak_rss_bytes() - before
        assert result.metrics.n_q_tokens == 50000
        # The working copies of the kept rows are 2 x 50,000 x 128 doubles (~100 MB); a copy of the
        # input would add 1 GiB (2 GiB in float64).
        assert grown < 400 * MB, f"{framework}: peak memory grew by {grown / MB:.0f} MB"
    # The kernel on a 1 GiB W (16.8M pairs x 16): its outputs are ~16.8M x (8 + 8 + 4) bytes.
    w = vectors.reshape(-1, 16)
    before = peak_rss_bytes()
    ap.set_blas_threads(2)
    pp = ap.kernel.pair_plasticity(w, np.zeros(16, dtype=np.float32), np.eye(16, dtype=np.float32))
    grown = peak_rss_bytes() - before
    assert pp.shape == (w.shape[0],)
    assert grown < 600 * MB, f"pair_plasticity: peak memory grew by {grown / MB:.0f} MB"


PROBE = """
import sys
for name in sys.argv[1:]:
    __import__(name)
import numpy as np, attention_plasticity as ap
from attention_plasticity._core import _bench
rng = np.random.default_rng(1)
w = rng.standard_normal((4096, 64))
a = rng.standard_normal((64, 64))
pp = ap.kernel.pair_plasticity(w, rng.standard_normal(64), a @ a.T)
print(_bench.blas_library())
print(pp.tobytes().hex()[:4000], pp.sum().hex())
"""


def debians_openblas(library):
    """Debian's OpenBLAS: the system's (the module of `pip install .`) or the wheel's copy of it
    (attention_plasticity.libs/, scripts/build_wheel.sh); never NumPy's, SciPy's or torch's."""
    library = os.path.realpath(library)
    in_wheel = os.path.basename(os.path.dirname(library)) == "attention_plasticity.libs"
    return "libopenblas" in library and ("site-packages" not in library or in_wheel)


def test_the_module_uses_debians_openblas_whatever_else_is_loaded():
    outputs = []
    for first in ([], ["torch"], ["scipy.linalg", "torch"], ["torch", "numpy.linalg"]):
        proc = subprocess.run([sys.executable, "-c", PROBE] + first, stdout=subprocess.PIPE, text=True, check=True)
        library, bits = proc.stdout.splitlines()
        assert debians_openblas(library), library
        outputs.append(bits)
    assert len(set(outputs)) == 1
    import numpy  # noqa: F401
    assert debians_openblas(_bench.blas_library())


TORCH_SET_DURING_CALL = r"""
import sys, threading, time
import numpy as np, torch
import attention_plasticity as ap
rng = np.random.default_rng(5)
n, d = 400_000, 48
w = torch.from_numpy(rng.standard_normal((n, d)))
mu = rng.standard_normal(d) * 0.1
a = rng.standard_normal((d, d)) * 0.1
sigma = a @ a.T + np.eye(d)
want = ap.kernel.pair_plasticity(w.numpy().copy(), mu, sigma)
started = threading.Event()
def free_the_storage():
    started.wait()
    time.sleep(0.02)
    w.set_(torch.empty(0, dtype=torch.float64))   # the tensor lets go of its storage
    big = [np.full(n * d, 7.0) for _ in range(4)]  # and the memory is reused
thread = threading.Thread(target=free_the_storage)
thread.start()
started.set()
got = ap.kernel.pair_plasticity(w, mu, sigma)
thread.join()
assert w.numel() == 0, "set_() did not run"
np.testing.assert_array_equal(got, want)
print("ok")
"""


def test_torch_storage_released_by_another_thread_during_a_call():
    # Issue 19: t.set_() in another thread during pair_plasticity freed the storage the call
    # was reading (SIGSEGV). The module holds the storage for the call, as NumPy's arrays are
    # held: the call reads the values it was given. In a child process, so that a crash is a
    # failure of this test, not of the test run.
    proc = subprocess.run([sys.executable, "-c", TORCH_SET_DURING_CALL], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-2000:])
