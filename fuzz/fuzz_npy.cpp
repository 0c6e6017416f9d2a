// libFuzzer target: the NPY reader of the front ends (include/attention_plasticity/io/npy_reader.hpp) on arbitrary
// bytes, as the whole file: header, shape and dtype checks, then the payload as vectors or
// as an integer column. Any exception other than input_error, any crash or sanitizer
// report, and any allocation beyond libFuzzer's -malloc_limit_mb is a finding.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include <attention_plasticity/io/npy_reader.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace attention_plasticity::io;
    const std::string path = "fuzz.npy";
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    try
    {
        const npy_header h = read_npy_header(in, size, path);
        if (is_float(h.dtype))
        {
            check_vector_header(h, path);
            if (h.dtype == npy_dtype::float32)
            {
                (void)read_vectors_as<float>(in, h, path);
            }
            else
            {
                (void)read_vectors_as<double>(in, h, path);
            }
        }
        else
        {
            (void)read_int_column(in, h, path, any_length, "");
        }
    }
    catch (const input_error&)
    {
    }
    return 0;
}
