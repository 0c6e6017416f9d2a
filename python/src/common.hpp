#ifndef AP_PYTHON_COMMON_HPP
#define AP_PYTHON_COMMON_HPP

// What every part of the module shares: array arguments read in place (or converted once),
// results handed to NumPy without a copy, the GIL released around the library's work, and
// the opaque containers. The binding only converts; every number comes from the library.
//
// Array arguments (docs: the module docstring, "Array arguments"):
//   float arrays   a C-contiguous float32 or float64 array on the CPU (NumPy, torch, anything
//                  with __dlpack__ or the buffer protocol) is read in place. Otherwise it is
//                  converted once, to C order: float16 / bfloat16 / float32 to float32, every
//                  other dtype to float64. A torch tensor that requires grad is read through
//                  .detach() (no copy). Lists and scalars go through numpy.asarray.
//   int columns    a C-contiguous int64 array is read in place; any other integer dtype is
//                  converted once to int64 (uint64 values above 2^63 - 1 are an error).

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/bind_vector.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <xtensor/xtensor.hpp>

#include <attention_plasticity/cells.hpp>
#include <attention_plasticity/tokens.hpp>

namespace nb = nanobind;
namespace ap = attention_plasticity;
using namespace nb::literals;

namespace ap_python
{
/// An argument that is any array-like object (converted in the function's body, where the
/// errors can name the function and the argument). Shown as numpy.typing.ArrayLike.
struct array_like
{
    nb::object object;
};
}  // namespace ap_python

namespace nanobind
{
namespace detail
{
    template <>
    struct type_caster<ap_python::array_like>
    {
        NB_TYPE_CASTER(ap_python::array_like, const_name("numpy.typing.ArrayLike"))

        bool from_python(handle src, uint8_t, cleanup_list*) noexcept
        {
            value.object = borrow(src);
            return true;
        }

        static handle from_cpp(const ap_python::array_like& v, rv_policy, cleanup_list*) noexcept
        {
            return v.object.inc_ref();
        }
    };
}  // namespace detail
}  // namespace nanobind

// The key buckets of a head are handed back and forth as one opaque list (no copy per call).
NB_MAKE_OPAQUE(std::vector<attention_plasticity::key_bucket>)

namespace ap_python
{
/// Python exception types of the module (created in module.cpp).
struct exception_types
{
    nb::handle invalid_argument;  // InvalidArgumentError(ValueError): std::invalid_argument
    nb::handle domain;            // DomainError(ValueError): std::domain_error
    nb::handle usage;             // UsageError(InvalidArgumentError): options, layout, head selection
    nb::handle output;            // OutputError(OSError): an output folder that cannot be used
};
exception_types& exceptions();

/// Raises InvalidArgumentError("fn: message") (a C++ std::invalid_argument, as the library's).
[[noreturn]] void throw_invalid(const char* fn, const std::string& message);

/// An array argument as the library reads it: a pointer to C-contiguous data (the caller's
/// own buffer, or the one copy made by the conversion, which `array` keeps alive).
struct array_arg
{
    nb::ndarray<nb::ro, nb::device::cpu, nb::c_contig> array;
    const void* data = nullptr;
    std::vector<std::size_t> shape;
    bool is_float32 = false;  // float arrays: float32 (else float64)
    bool converted = false;   // a copy was made
    // A torch tensor's storage, held for the call: another thread's t.set_() (or
    // t.resize_()) replaces the tensor's storage while the GIL is released, and would
    // otherwise free the data read here (NumPy refuses to resize an exported array).
    nb::object storage;

    std::size_t size() const
    {
        std::size_t n = 1;
        for (std::size_t s : shape)
        {
            n *= s;
        }
        return n;
    }
};

/// For float_array: any number of dimensions (elementwise functions).
constexpr std::size_t any_ndim = static_cast<std::size_t>(-1);

/// A float array of `ndim` dimensions (1 or 2), read in place or converted once (see above).
/// Errors name `fn` and `name`: not array-like -> TypeError; wrong dimensions or dtype ->
/// InvalidArgumentError.
array_arg float_array(nb::handle obj, const char* fn, const char* name, std::size_t ndim);

/// A 1-D int64 column, read in place or converted once (see above).
array_arg int64_array(nb::handle obj, const char* fn, const char* name);

/// A 1-D float64 column (positions and other reals the library reads as double): int64 and
/// float64 arrays are read in place (the library converts integers itself), others converted
/// once to float64.
array_arg real_array(nb::handle obj, const char* fn, const char* name);

/// True when an argument of real_array holds int64 values (else float64).
bool is_int64(const array_arg& a);

/// A 1-D float64 argument (a real parameter: beta, tau, distances, ...): float64 read in place,
/// anything else converted once to float64.
array_arg double_array(nb::handle obj, const char* fn, const char* name);

/// A read-only xtensor view of an argument's data (no copy).
template <class T, std::size_t N>
ap::const_tensor_view<T, N> view(const array_arg& a)
{
    std::array<std::size_t, N> shape{};
    for (std::size_t i = 0; i < N; ++i)
    {
        shape[i] = a.shape[i];
    }
    using buffer = xt::xbuffer_adaptor<const T*, xt::no_ownership, std::allocator<T>>;
    return ap::const_tensor_view<T, N>(buffer(static_cast<const T*>(a.data), a.size()), shape);
}

/// f(view<float or double, N>(a)), by the argument's value type.
template <std::size_t N, class F>
decltype(auto) visit_float(const array_arg& a, F&& f)
{
    if (a.is_float32)
    {
        return f(view<float, N>(a));
    }
    return f(view<double, N>(a));
}

/// A 1-D float argument copied as float64 (for results that own their values).
inline xt::xtensor<double, 1> copy_vector(const array_arg& a)
{
    return visit_float<1>(a, [](const auto& x) { return xt::xtensor<double, 1>(xt::cast<double>(x)); });
}

/// The working type a call asks for: "float32", "float64" or None (the input's type).
enum class precision
{
    input,
    float32,
    float64
};
precision precision_arg(const nb::handle& dtype, const char* fn, const char* name = "dtype");

/// f(tag) with tag a pointer of the working type: the input's type, or the one asked for.
template <class F>
decltype(auto) visit_precision(precision p, bool input_is_float32, F&& f)
{
    const bool use_float = p == precision::float32 || (p == precision::input && input_is_float32);
    if (use_float)
    {
        return f(static_cast<float*>(nullptr));
    }
    return f(static_cast<double*>(nullptr));
}

/// Runs f with the GIL released (the library's work never touches Python objects).
template <class F>
decltype(auto) without_gil(F&& f)
{
    nb::gil_scoped_release release;
    return f();
}

/// A new NumPy array that owns `x` (moved, not copied).
template <class T, std::size_t N>
nb::ndarray<nb::numpy, T> to_numpy(xt::xtensor<T, N>&& x)
{
    auto* owned = new xt::xtensor<T, N>(std::move(x));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<xt::xtensor<T, N>*>(p); });
    std::array<std::size_t, N> shape{};
    for (std::size_t i = 0; i < N; ++i)
    {
        shape[i] = owned->shape()[i];
    }
    return nb::ndarray<nb::numpy, T>(owned->data(), N, shape.data(), owner);
}

/// Indices (std::size_t) as a new int64 NumPy array that owns them (the same bytes: every
/// index is below 2^63).
template <std::size_t N>
nb::ndarray<nb::numpy, std::int64_t> indices_to_numpy(xt::xtensor<std::size_t, N>&& x)
{
    static_assert(sizeof(std::size_t) == sizeof(std::int64_t), "64-bit indices");
    auto* owned = new xt::xtensor<std::size_t, N>(std::move(x));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<xt::xtensor<std::size_t, N>*>(p); });
    std::array<std::size_t, N> shape{};
    for (std::size_t i = 0; i < N; ++i)
    {
        shape[i] = owned->shape()[i];
    }
    return nb::ndarray<nb::numpy, std::int64_t>(reinterpret_cast<std::int64_t*>(owned->data()), N, shape.data(),
                                                 owner);
}

/// A std::vector as a new NumPy array that owns it.
template <class T>
nb::ndarray<nb::numpy, T> vector_to_numpy(std::vector<T>&& v)
{
    auto* owned = new std::vector<T>(std::move(v));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    const std::size_t shape[1] = {owned->size()};
    return nb::ndarray<nb::numpy, T>(owned->data(), 1, shape, owner);
}

/// A read-only NumPy view of a tensor held by the Python object `owner` (a field of a
/// result object): no copy; the view keeps `owner` alive.
template <class T, std::size_t N>
nb::ndarray<nb::numpy, const T> field_view(const xt::xtensor<T, N>& x, nb::handle owner)
{
    std::array<std::size_t, N> shape{};
    for (std::size_t i = 0; i < N; ++i)
    {
        shape[i] = x.shape()[i];
    }
    return nb::ndarray<nb::numpy, const T>(x.data(), N, shape.data(), owner);
}

/// Indices held by `owner` as a read-only int64 view.
template <std::size_t N>
nb::ndarray<nb::numpy, const std::int64_t> index_field_view(const xt::xtensor<std::size_t, N>& x, nb::handle owner)
{
    std::array<std::size_t, N> shape{};
    for (std::size_t i = 0; i < N; ++i)
    {
        shape[i] = x.shape()[i];
    }
    return nb::ndarray<nb::numpy, const std::int64_t>(reinterpret_cast<const std::int64_t*>(x.data()), N,
                                                       shape.data(), owner);
}

/// A std::vector held by `owner` as a read-only view (std::size_t as int64).
template <class T>
auto vector_field_view(const std::vector<T>& v, nb::handle owner)
{
    using out_t = std::conditional_t<std::is_same<T, std::size_t>::value, std::int64_t, T>;
    const std::size_t shape[1] = {v.size()};
    return nb::ndarray<nb::numpy, const out_t>(reinterpret_cast<const out_t*>(v.data()), 1, shape, owner);
}

// The parts of the module, one per file, each its own submodule of _core (module.cpp).
void bind_kernel(nb::module_& m);  // _core.kernel: normal, random, sampler, plasticity kernel
void bind_steps(nb::module_& m);   // _core.steps: the steps of docs/method.md §2.1-2.15 and their statistics
void bind_extensions(nb::module_& m);  // _core.extensions: the extensions of docs/method.md §8
void bind_head(nb::module_& m);    // _core.head: tokens, analyze_head and its result
void bind_dump(nb::module_& m);    // _core.dump: the options of ap_analyze, dump runs, BLAS threads
void bind_tables(nb::module_& m);  // _core.tables: the tables of §3, their schema and columns
void bind_companion(nb::module_& m);  // _core.companion: §8.5-8.6: planar rotation, PCA roles, compare_runs

// The private submodule _core._bench: hooks of the benchmarks and tests, not the API.
void bind_head_bench(nb::module_& bench);  // analyze_head_seconds
void bind_dump_bench(nb::module_& bench);  // blas_library
}  // namespace ap_python

#endif
