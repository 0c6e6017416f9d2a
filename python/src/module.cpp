// attention_plasticity._core: the library on NumPy arrays and torch tensors (docs/method.md),
// and the dump analysis of ap_analyze. The module, its exceptions and the array arguments.

#include <cstdint>
#include <stdexcept>
#include <string>

#include <attention_plasticity/blas_policy.hpp>
#include <attention_plasticity/run/cli_util.hpp>
#include <attention_plasticity/run/result_set.hpp>
#include <attention_plasticity/version.hpp>

#include "common.hpp"

namespace ap_python
{
exception_types& exceptions()
{
    static exception_types types;
    return types;
}

void throw_invalid(const char* fn, const std::string& message)
{
    throw std::invalid_argument(std::string(fn) + ": " + message);
}

namespace
{
    using any_c_array = nb::ndarray<nb::ro, nb::device::cpu, nb::c_contig>;
    using any_cpu_array = nb::ndarray<nb::ro, nb::device::cpu>;
    using any_device_array = nb::ndarray<nb::ro>;

    std::string dtype_name(const nb::dlpack::dtype& dt)
    {
        const char* prefix = "?";
        switch (static_cast<nb::dlpack::dtype_code>(dt.code))
        {
            case nb::dlpack::dtype_code::Int: prefix = "int"; break;
            case nb::dlpack::dtype_code::UInt: prefix = "uint"; break;
            case nb::dlpack::dtype_code::Float: prefix = "float"; break;
            case nb::dlpack::dtype_code::Bfloat: prefix = "bfloat"; break;
            case nb::dlpack::dtype_code::Complex: prefix = "complex"; break;
            case nb::dlpack::dtype_code::Bool: return "bool";
            default: break;
        }
        return prefix + std::to_string(dt.bits);
    }

    bool has_code(const nb::dlpack::dtype& dt, nb::dlpack::dtype_code code)
    {
        return dt.code == static_cast<std::uint8_t>(code) && dt.lanes == 1;
    }

    std::string python_type_name(nb::handle obj)
    {
        return nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))).attr("__name__"));
    }

    /// `obj` as an array on the CPU of any layout, without converting its values: the object
    /// itself, its .detach() (a torch tensor that requires grad), or numpy.asarray(obj) (lists,
    /// scalars, other array-likes). Returns the object that `out` views.
    nb::object cpu_array(nb::handle obj, const char* fn, const char* name, any_cpu_array& out)
    {
        if (nb::try_cast(obj, out, false))
        {
            return nb::borrow(obj);
        }
        if (nb::hasattr(obj, "requires_grad") && nb::hasattr(obj, "detach"))
        {
            nb::object detached = obj.attr("detach")();  // shares the storage
            if (nb::try_cast(detached, out, false))
            {
                return detached;
            }
        }
        any_device_array elsewhere;
        if (nb::try_cast(obj, elsewhere, false))
        {
            throw nb::type_error((std::string(fn) + ": " + name + " is not in CPU memory (device type "
                                  + std::to_string(elsewhere.device_type()) + "); pass a CPU array, e.g. tensor.cpu()")
                                     .c_str());
        }
        if (nb::isinstance<nb::str>(obj) || nb::isinstance<nb::bytes>(obj) || obj.is_none())
        {
            throw nb::type_error(
                (std::string(fn) + ": " + name + " must be an array, got " + python_type_name(obj)).c_str());
        }
        nb::object converted;
        try
        {
            converted = nb::module_::import_("numpy").attr("asarray")(obj);
        }
        catch (const nb::python_error&)
        {
            throw nb::type_error(
                (std::string(fn) + ": " + name + " must be an array, got " + python_type_name(obj)).c_str());
        }
        if (nb::try_cast(converted, out, false))
        {
            return converted;
        }
        // NumPy arrays that DLPack and the buffer protocol refuse: another byte order.
        const nb::object dtype = converted.attr("dtype");
        if (nb::cast<std::string>(dtype.attr("kind")).find_first_of("iufb") == 0)
        {
            converted = converted.attr("astype")(dtype.attr("newbyteorder")("="));
            if (nb::try_cast(converted, out, false))
            {
                return converted;
            }
        }
        throw nb::type_error((std::string(fn) + ": " + name + " must be an array of numbers, got "
                              + python_type_name(obj) + " of dtype " + nb::cast<std::string>(nb::str(dtype)))
                                 .c_str());
    }

    void check_ndim(std::size_t actual, std::size_t wanted, const char* fn, const char* name)
    {
        if (wanted != any_ndim && actual != wanted)
        {
            throw_invalid(fn, std::string(name) + " must be " + std::to_string(wanted) + "-D, got "
                                  + std::to_string(actual) + " dimensions");
        }
    }

    /// `src` converted once to a C-contiguous array of T (nanobind's conversion: astype for
    /// NumPy, .to(dtype).contiguous() for torch, ...; numpy.ascontiguousarray otherwise).
    template <class T>
    any_c_array convert_to(const nb::object& src, const char* fn, const char* name)
    {
        nb::ndarray<nb::ro, T, nb::device::cpu, nb::c_contig> typed;
        if (nb::try_cast(src, typed, true))
        {
            return any_c_array(typed);
        }
        nb::module_ np = nb::module_::import_("numpy");
        nb::object copy = np.attr("ascontiguousarray")(np.attr("asarray")(src), "dtype"_a = np.attr(
                                                           std::is_same<T, float>::value ? "float32"
                                                           : std::is_same<T, double>::value ? "float64" : "int64"));
        if (nb::try_cast(copy, typed, false))
        {
            return any_c_array(typed);
        }
        throw nb::type_error((std::string(fn) + ": " + name + " cannot be converted to an array of numbers").c_str());
    }

    /// A torch tensor's storage (torch.Tensor.untyped_storage(): a reference of its own to the
    /// memory, which set_() on the tensor does not free); None for anything else.
    nb::object storage_of(nb::handle obj)
    {
        if (nb::hasattr(obj, "untyped_storage") && nb::hasattr(obj, "set_"))
        {
            try
            {
                return obj.attr("untyped_storage")();
            }
            catch (const nb::python_error&)
            {
                // not torch's: nothing to hold
            }
        }
        return nb::none();
    }

    array_arg finish(any_c_array array, bool converted)
    {
        array_arg a;
        a.array = array;
        a.data = array.data();
        a.shape.resize(array.ndim());
        for (std::size_t i = 0; i < array.ndim(); ++i)
        {
            a.shape[i] = array.shape(i);
        }
        a.converted = converted;
        return a;
    }
}  // namespace

array_arg float_array(nb::handle obj, const char* fn, const char* name, std::size_t ndim)
{
    any_c_array in_place;
    if (nb::try_cast(obj, in_place, false))
    {
        const auto dt = in_place.dtype();
        const bool f32 = dt == nb::dtype<float>();
        if (f32 || dt == nb::dtype<double>())
        {
            check_ndim(in_place.ndim(), ndim, fn, name);
            array_arg a = finish(in_place, false);
            a.is_float32 = f32;
            a.storage = storage_of(obj);
            return a;
        }
    }
    any_cpu_array any;
    const nb::object src = cpu_array(obj, fn, name, any);
    check_ndim(any.ndim(), ndim, fn, name);
    const auto dt = any.dtype();
    if (has_code(dt, nb::dlpack::dtype_code::Complex) || has_code(dt, nb::dlpack::dtype_code::Bcomplex))
    {
        throw_invalid(fn, std::string(name) + " has the complex dtype " + dtype_name(dt) + "; expected real numbers");
    }
    const bool to_float32 =
        (has_code(dt, nb::dlpack::dtype_code::Float) && dt.bits <= 32) || has_code(dt, nb::dlpack::dtype_code::Bfloat);
    array_arg a = to_float32 ? finish(convert_to<float>(src, fn, name), true)
                             : finish(convert_to<double>(src, fn, name), true);
    a.is_float32 = to_float32;
    a.storage = storage_of(src);  // a detached tensor shares the caller's storage
    return a;
}

array_arg int64_array(nb::handle obj, const char* fn, const char* name)
{
    any_c_array in_place;
    if (nb::try_cast(obj, in_place, false) && in_place.dtype() == nb::dtype<std::int64_t>())
    {
        check_ndim(in_place.ndim(), 1, fn, name);
        array_arg a = finish(in_place, false);
        a.storage = storage_of(obj);
        return a;
    }
    any_cpu_array any;
    const nb::object src = cpu_array(obj, fn, name, any);
    check_ndim(any.ndim(), 1, fn, name);
    const auto dt = any.dtype();
    const bool is_int = has_code(dt, nb::dlpack::dtype_code::Int) || has_code(dt, nb::dlpack::dtype_code::UInt);
    if (!is_int && any.size() > 0)
    {
        throw_invalid(fn, std::string(name) + " must hold integers, got dtype " + dtype_name(dt));
    }
    array_arg a = finish(convert_to<std::int64_t>(src, fn, name), true);
    a.storage = storage_of(src);
    if (has_code(dt, nb::dlpack::dtype_code::UInt) && dt.bits == 64)
    {
        const auto* values = static_cast<const std::int64_t*>(a.data);
        for (std::size_t i = 0; i < a.size(); ++i)
        {
            if (values[i] < 0)  // wrapped around: the uint64 value was above 2^63 - 1
            {
                throw_invalid(fn, std::string(name) + "[" + std::to_string(i) + "] = "
                                      + std::to_string(static_cast<std::uint64_t>(values[i]))
                                      + " does not fit in int64");
            }
        }
    }
    return a;
}

array_arg real_array(nb::handle obj, const char* fn, const char* name)
{
    any_c_array in_place;
    if (nb::try_cast(obj, in_place, false)
        && (in_place.dtype() == nb::dtype<double>() || in_place.dtype() == nb::dtype<std::int64_t>()))
    {
        check_ndim(in_place.ndim(), 1, fn, name);
        array_arg a = finish(in_place, false);
        a.is_float32 = false;
        a.storage = storage_of(obj);
        return a;
    }
    any_cpu_array any;
    const nb::object src = cpu_array(obj, fn, name, any);
    check_ndim(any.ndim(), 1, fn, name);
    const auto dt = any.dtype();
    if (has_code(dt, nb::dlpack::dtype_code::Complex) || has_code(dt, nb::dlpack::dtype_code::Bcomplex))
    {
        throw_invalid(fn, std::string(name) + " has the complex dtype " + dtype_name(dt) + "; expected real numbers");
    }
    array_arg a = finish(convert_to<double>(src, fn, name), true);
    a.storage = storage_of(src);
    return a;
}

bool is_int64(const array_arg& a)
{
    return a.array.dtype() == nb::dtype<std::int64_t>();
}

array_arg double_array(nb::handle obj, const char* fn, const char* name)
{
    const array_arg a = real_array(obj, fn, name);
    // Integer values of a real parameter: converted to float64 (exactly below 2^53).
    return is_int64(a) ? float_array(obj, fn, name, 1) : a;
}

precision precision_arg(const nb::handle& dtype, const char* fn, const char* name)
{
    if (dtype.is_none())
    {
        return precision::input;
    }
    std::string text = nb::cast<std::string>(nb::str(dtype));
    if (text != "torch.float32" && text != "torch.float64")
    {
        try
        {
            text = nb::cast<std::string>(nb::module_::import_("numpy").attr("dtype")(dtype).attr("name"));
        }
        catch (const nb::python_error&)
        {
        }
    }
    if (text == "float32" || text == "torch.float32")
    {
        return precision::float32;
    }
    if (text == "float64" || text == "torch.float64")
    {
        return precision::float64;
    }
    throw_invalid(fn, std::string(name) + " must be None, 'float32' or 'float64', got "
                          + nb::cast<std::string>(nb::repr(dtype)));
}
}  // namespace ap_python

namespace
{
const char* const module_doc = R"doc(attention_plasticity: attention heads choosing keys by content or by position.

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
)doc";

void translate(const std::exception_ptr& p, void*)
{
    auto& types = ap_python::exceptions();
    try
    {
        std::rethrow_exception(p);
    }
    catch (const attention_plasticity::run::usage_error& e)
    {
        PyErr_SetString(types.usage.ptr(), e.what());
    }
    catch (const attention_plasticity::run::output_error& e)
    {
        PyErr_SetString(types.output.ptr(), e.what());
    }
    catch (const std::invalid_argument& e)
    {
        PyErr_SetString(types.invalid_argument.ptr(), e.what());
    }
    catch (const std::domain_error& e)
    {
        PyErr_SetString(types.domain.ptr(), e.what());
    }
}

nb::handle new_exception(nb::module_& m, const char* name, const char* doc, PyObject* base)
{
    const std::string qualified = std::string("attention_plasticity.") + name;
    PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
    if (type == nullptr)
    {
        throw nb::python_error();
    }
    m.attr(name) = nb::handle(type);
    return nb::handle(type);
}
}  // namespace

namespace
{
/// The submodules of _core, one per bind_*.cpp, in the order they are bound (a later part's
/// signatures name an earlier part's types). The package's __init__ re-exports their names.
struct part
{
    const char* name;
    const char* doc;
    void (*bind)(nb::module_&);
};

constexpr part parts[] = {
    {"kernel",
     "The kernel of docs/method.md §4 (pair plasticity, its moments), the key-pair sampler (§5), the\n"
     "random streams (§6) and the normal distribution.",
     ap_python::bind_kernel},
    {"steps",
     "The steps of the method (docs/method.md §2.1-2.15) and the statistics of §7 they use.",
     ap_python::bind_steps},
    {"extensions",
     "The extensions of docs/method.md §8: distance maps, the empirical AP, standard errors and intervals.",
     ap_python::bind_extensions},
    {"head", "The per-head analysis: Tokens, HeadId, HeadOptions, analyze_head and HeadResult.",
     ap_python::bind_head},
    {"dump",
     "The dump analysis of ap_analyze (DumpRun, the option table behind analyze_dump) and the BLAS\n"
     "threads and kernels (docs/method.md §7.7).",
     ap_python::bind_dump},
    {"companion",
     "The companion measures of docs/method.md §8.5 (planar rotation, PCA roles) and the comparison\n"
     "of result sets (§8.6).",
     ap_python::bind_companion},
    {"tables",
     "The tables of docs/method.md §3: their files, their columns' schema from the C++ CSV writer, and\n"
     "head results as columns of NumPy arrays.",
     ap_python::bind_tables},
};
}  // namespace

NB_MODULE(_core, m)
{
    // The front ends' BLAS kernel policy (docs/method.md §7.7), before any BLAS call of the
    // module: the kernels ap_analyze uses, OpenBLAS on one thread and its pool stopped.
    attention_plasticity::select_blas_kernels();
    m.doc() = module_doc;
    // The project's version (CMakeLists.txt's project(VERSION), attention_plasticity/version.hpp):
    // attention_plasticity.__version__, the same as the programs' --version and run.json.
    m.attr("__version__") = attention_plasticity::version;
    auto& types = ap_python::exceptions();
    types.invalid_argument = new_exception(
        m, "InvalidArgumentError",
        "An argument of the wrong shape, size or option (the library's std::invalid_argument).", PyExc_ValueError);
    types.domain = new_exception(
        m, "DomainError", "A value out of its domain: NaN/Inf, a negative position, ... (std::domain_error).",
        PyExc_ValueError);
    types.usage = new_exception(m, "UsageError",
                                "An option, configuration file, dump layout or head selection that cannot be used "
                                "(ap_analyze's usage errors, exit status 2).",
                                types.invalid_argument.ptr());
    types.output = new_exception(m, "OutputError",
                                 "An output folder that cannot be used, or a result set that cannot be written.",
                                 PyExc_OSError);
    nb::register_exception_translator(translate);

    // Each submodule is also in sys.modules (def_submodule puts it there), so that
    // `from attention_plasticity._core.kernel import pair_plasticity` works as its stub says.
    for (const part& p : parts)
    {
        nb::module_ sub = m.def_submodule(p.name, p.doc);
        p.bind(sub);
    }
    // The reprs, to_dict() and HeadResult.tables() of the result types are attached by the package
    // (attention_plasticity/results.py, at import), not from here: this module imports nothing of
    // the package it sits in (issue 26: the layer line between the two).

    nb::module_ bench =
        m.def_submodule("_bench", "Hooks of the benchmarks and the tests (benchmarks/bench_python.py, tests/python): "
                                  "not the API.");
    bench.def(
        "read_address",
        [](nb::handle x, const std::string& kind) {
            const ap_python::array_arg a =
                kind == "int64"  ? ap_python::int64_array(x, "read_address", "x")
                : kind == "real" ? ap_python::real_array(x, "read_address", "x")
                                 : ap_python::float_array(x, "read_address", "x", ap_python::any_ndim);
            return nb::make_tuple(reinterpret_cast<std::uintptr_t>(a.data), a.converted);
        },
        "x"_a, "kind"_a = "float",
        "(the address of the data the module reads for array x, whether it was converted), with x taken\n"
        "as the module takes a float array (kind 'float'), an integer column ('int64') or positions ('real').");
    ap_python::bind_head_bench(bench);
    ap_python::bind_dump_bench(bench);
}
