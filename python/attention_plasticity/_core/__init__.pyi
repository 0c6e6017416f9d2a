"""
attention_plasticity: attention heads choosing keys by content or by position.

The compiled core of the package: every step of the method (docs/method.md §2), the
pair-plasticity kernel (§4), the key-pair sampler (§5), the random streams (§6), the
statistics (§7), the extensions (§8: distance maps, the empirical AP, standard errors and
intervals) and the per-head analysis, bound as thin wrappers over the C++ library (the
numbers are the C++ library's, bit for bit), and the dump analysis of ap_analyze.

Parts
-----
One submodule per topic, each with its stub (_core/<part>.pyi); `import attention_plasticity`
re-exports their public names: kernel (§4-§6: the kernel, the sampler, the streams), steps
(§2 and §7), extensions (§8.1-8.4), head (analyze_head and its types), dump (ap_analyze's run
and options, the BLAS threads), companion (§8.5-8.6), tables (§3).

Array arguments
---------------
Float arrays: a C-contiguous float32 or float64 array in CPU memory (NumPy, a torch tensor,
anything with __dlpack__ or the buffer protocol) is read in place, never copied. Any other
array is converted once, to C order: float16, bfloat16 and non-contiguous float32 to float32,
every other dtype (integers, non-contiguous float64, ...) to float64. A torch tensor that
requires grad is read through .detach() (no copy); lists and scalars go through numpy.asarray.
Integer columns (positions, buckets, example ids, indices): a C-contiguous int64 array is read
in place; any other integer dtype (int32, ...) is converted once to int64.

Results are NumPy arrays (owning their data, or read-only views into the result object that
holds them) and small result classes with read-only properties; tables are pandas DataFrames
with the columns of the CSVs of docs/method.md §3.

Errors
------
The library's std::invalid_argument (shapes, sizes, options) is InvalidArgumentError and its
std::domain_error (NaN/Inf, values out of domain) DomainError, both subclasses of ValueError,
with the library's message (the function called, the argument, the offending value). The
options of analyze_dump raise UsageError (a subclass of InvalidArgumentError) and an output
folder that cannot be used OutputError (a subclass of OSError). An argument that is not an
array at all is a TypeError.

Threads
-------
Every call that computes releases the GIL. BLAS (Debian's OpenBLAS) runs with the number of
threads set_blas_threads() gives it; analyze_dump runs heads on its own threads with one BLAS
thread each.
"""

from attention_plasticity import (
    DomainError as DomainError,
    InvalidArgumentError as InvalidArgumentError,
    OutputError as OutputError,
    UsageError as UsageError
)
from attention_plasticity._core import (
    companion as companion,
    dump as dump,
    extensions as extensions,
    head as head,
    kernel as kernel,
    steps as steps,
    tables as tables
)
