// libFuzzer target: the NPY reader of the front ends (include/attention_plasticity/io/npy_reader.hpp) on arbitrary
// bytes, as the whole file: header, shape and dtype checks, then the payload as vectors or
// as an integer column. Any exception other than input_error, any crash or sanitizer
// report, and any allocation beyond libFuzzer's -malloc_limit_mb is a finding.
//
// The same bytes are also written to a file and read as vectors by read_vectors, which maps
// the file and reads the vectors in place (mapped_file.hpp): it must give the same values as
// the stream reader, or fail with the same reason; anything else aborts (a finding).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include <unistd.h>

#include <attention_plasticity/io/npy_reader.hpp>

namespace
{
/// The file the mapped reader reads, removed when the fuzzer exits.
const std::string& scratch_file()
{
    static const struct scratch
    {
        std::string path = "/tmp/fuzz_npy_" + std::to_string(::getpid()) + ".npy";
        ~scratch() { std::remove(path.c_str()); }
    } file;
    return file.path;
}

/// read_vectors on `data` written to a file: the same payload bytes as `expected`, or the
/// same reason as `expected_reason` when that is not empty.
void check_mapped(const std::uint8_t* data, std::size_t size, const std::string& expected,
                  const std::string& expected_reason)
{
    using namespace attention_plasticity::io;
    const std::string& path = scratch_file();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr)
    {
        return;
    }
    const bool written = size == 0 || std::fwrite(data, 1, size, f) == size;
    std::fclose(f);
    if (!written)
    {
        return;
    }
    try
    {
        const npy_vectors v = read_vectors(path);
        const std::size_t bytes = v.rows() * v.cols() * dtype_size(v.dtype());
        const void* values = v.dtype() == npy_dtype::float32 ? static_cast<const void*>(v.data<float>())
                                                             : static_cast<const void*>(v.data<double>());
        // No memcmp of zero bytes: the pointers of an empty payload may be null (UB even for 0 bytes).
        if (!expected_reason.empty() || bytes != expected.size()
            || (bytes != 0 && std::memcmp(values, expected.data(), bytes) != 0))
        {
            std::abort();
        }
    }
    catch (const input_error& e)
    {
        if (e.reason() != expected_reason)
        {
            std::abort();
        }
    }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace attention_plasticity::io;
    const std::string path = "fuzz.npy";
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    bool as_vectors = true;  // the stream reader took the path of vectors (or failed before)
    std::string payload, reason;
    try
    {
        const npy_header h = read_npy_header(in, size, path);
        if (is_float(h.dtype))
        {
            check_vector_header(h, path);
            if (h.dtype == npy_dtype::float32)
            {
                const auto v = read_vectors_as<float>(in, h, path);
                payload.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
            }
            else
            {
                const auto v = read_vectors_as<double>(in, h, path);
                payload.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
            }
        }
        else
        {
            as_vectors = false;
            (void)read_int_column(in, h, path, any_length, "");
        }
    }
    catch (const input_error& e)
    {
        reason = e.reason();
    }
    if (as_vectors)
    {
        check_mapped(data, size, payload, reason);
    }
    return 0;
}
