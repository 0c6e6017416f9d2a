#ifndef ATTENTION_PLASTICITY_IO_NPY_READER_HPP
#define ATTENTION_PLASTICITY_IO_NPY_READER_HPP

// Reading NPY files (NumPy's format, versions 1.0, 2.0 and 3.0): the header is parsed here
// (magic, version, the dict with descr, fortran_order and shape) so that every problem is
// reported with the file and what is wrong, and the payload is read straight into an
// xtensor container. xt::load_npy is not used for reading: it does not notice a truncated
// payload, and it mis-reads 1.0 headers whose length has a low byte >= 0x80.
//
// Everything read from the file is bounded before it is used: the header length (64 KiB),
// the payload (exactly what the file holds, and at most the machine's physical memory), so
// that no header can make the reader allocate what it cannot have. Every problem throws
// input_error{file, reason}. The reader works on any std::istream (the fuzz target feeds it
// memory); open_npy() adds the checks of a path (docs/method.md §1). read_vectors() gives a
// file's vectors in place, from a read-only mapping of the file (mapped_file.hpp).

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

#include <xtensor/xtensor.hpp>

#include "bounded_read.hpp"
#include "errors.hpp"
#include "fs_util.hpp"
#include "mapped_file.hpp"

namespace attention_plasticity::io
{
enum class npy_dtype
{
    float32,
    float64,
    int32,
    int64
};

inline const char* dtype_name(npy_dtype t)
{
    switch (t)
    {
        case npy_dtype::float32: return "float32";
        case npy_dtype::float64: return "float64";
        case npy_dtype::int32: return "int32";
        case npy_dtype::int64: return "int64";
    }
    return "?";
}

inline std::size_t dtype_size(npy_dtype t)
{
    return (t == npy_dtype::float32 || t == npy_dtype::int32) ? 4 : 8;
}

inline bool is_float(npy_dtype t)
{
    return t == npy_dtype::float32 || t == npy_dtype::float64;
}

struct npy_header
{
    std::string descr;               // as written, e.g. "<f4"
    npy_dtype dtype = npy_dtype::float64;
    bool fortran_order = false;
    std::vector<std::size_t> shape;
    std::size_t data_offset = 0;     // bytes before the payload
    std::size_t count = 1;           // product of shape
};

namespace detail
{
    /// A minimal parser for the Python dict literal of an NPY header.
    class header_parser
    {
    public:
        header_parser(const std::string& text, const std::string& file) : m_text(text), m_file(file) {}

        npy_header parse()
        {
            npy_header h;
            bool have_descr = false, have_order = false, have_shape = false;
            skip_space();
            expect('{');
            while (true)
            {
                skip_space();
                if (peek() == '}')
                {
                    ++m_pos;
                    break;
                }
                const std::string key = parse_string();
                skip_space();
                expect(':');
                skip_space();
                if (key == "descr")
                {
                    if (peek() != '\'' && peek() != '"')
                    {
                        fail("unsupported dtype (a structured or nested descr); expected a plain "
                             "float32/float64/int32/int64 array");
                    }
                    h.descr = parse_string();
                    have_descr = true;
                }
                else if (key == "fortran_order")
                {
                    h.fortran_order = parse_bool();
                    have_order = true;
                }
                else if (key == "shape")
                {
                    h.shape = parse_shape();
                    have_shape = true;
                }
                else
                {
                    skip_value();
                }
                skip_space();
                if (peek() == ',')
                {
                    ++m_pos;
                    continue;
                }
                skip_space();
                expect('}');
                break;
            }
            if (!have_descr || !have_order || !have_shape)
            {
                fail(std::string("NPY header lacks the '") + (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape")
                     + "' key");
            }
            return h;
        }

    private:
        [[noreturn]] void fail(const std::string& what) const { throw input_error(m_file, what); }

        char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }

        void skip_space()
        {
            while (m_pos < m_text.size() && (m_text[m_pos] == ' ' || m_text[m_pos] == '\t' || m_text[m_pos] == '\n'
                                             || m_text[m_pos] == '\r'))
            {
                ++m_pos;
            }
        }

        void expect(char c)
        {
            if (peek() != c)
            {
                fail(std::string("corrupt NPY header (expected '") + c + "' at offset " + std::to_string(m_pos)
                     + " of the header dict)");
            }
            ++m_pos;
        }

        std::string parse_string()
        {
            const char quote = peek();
            if (quote != '\'' && quote != '"')
            {
                fail("corrupt NPY header (expected a quoted string at offset " + std::to_string(m_pos) + ")");
            }
            ++m_pos;
            const std::size_t end = m_text.find(quote, m_pos);
            if (end == std::string::npos)
            {
                fail("corrupt NPY header (unterminated string)");
            }
            std::string s = m_text.substr(m_pos, end - m_pos);
            // NPY headers are ASCII; refusing other bytes here also keeps them out of messages.
            for (const char c : s)
            {
                if (c < 0x20 || c > 0x7e)
                {
                    fail("corrupt NPY header (a non-printable byte in a string at offset " + std::to_string(m_pos) + ")");
                }
            }
            m_pos = end + 1;
            return s;
        }

        bool parse_bool()
        {
            if (m_text.compare(m_pos, 4, "True") == 0)
            {
                m_pos += 4;
                return true;
            }
            if (m_text.compare(m_pos, 5, "False") == 0)
            {
                m_pos += 5;
                return false;
            }
            fail("corrupt NPY header (fortran_order is neither True nor False)");
        }

        std::vector<std::size_t> parse_shape()
        {
            expect('(');
            std::vector<std::size_t> shape;
            while (true)
            {
                skip_space();
                if (peek() == ')')
                {
                    ++m_pos;
                    break;
                }
                if (!(peek() >= '0' && peek() <= '9'))
                {
                    fail("corrupt NPY header (shape is not a tuple of non-negative integers)");
                }
                unsigned long long value = 0;
                while (peek() >= '0' && peek() <= '9')
                {
                    const unsigned digit = static_cast<unsigned>(peek() - '0');
                    if (value > (std::numeric_limits<unsigned long long>::max() - digit) / 10)
                    {
                        fail("corrupt NPY header (a shape entry overflows)");
                    }
                    value = value * 10 + digit;
                    ++m_pos;
                }
                if (peek() == 'L')  // Python 2 long suffix
                {
                    ++m_pos;
                }
                shape.push_back(static_cast<std::size_t>(value));
                skip_space();
                if (peek() == ',')
                {
                    ++m_pos;
                }
                else if (peek() != ')')
                {
                    fail("corrupt NPY header (shape is not a tuple of non-negative integers)");
                }
            }
            return shape;
        }

        void skip_value()
        {
            int depth = 0;
            while (m_pos < m_text.size())
            {
                const char c = m_text[m_pos];
                if (c == '\'' || c == '"')
                {
                    parse_string();
                    continue;
                }
                if (c == '(' || c == '[' || c == '{')
                {
                    ++depth;
                }
                else if (c == ')' || c == ']' || c == '}')
                {
                    if (depth == 0)
                    {
                        return;
                    }
                    --depth;
                }
                else if (c == ',' && depth == 0)
                {
                    return;
                }
                ++m_pos;
            }
        }

        const std::string& m_text;
        const std::string& m_file;
        std::size_t m_pos = 0;
    };
}  // namespace detail


/// The largest NPY header accepted (NumPy itself writes a few hundred bytes).
inline constexpr std::size_t npy_max_header_bytes = 65536;

namespace detail
{
    inline std::string gib(std::uintmax_t bytes)
    {
        char buf[48];
        std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
        return buf;
    }
}  // namespace detail

/// Parses the NPY header at the start of `in`, a file of `file_size` bytes named `path`,
/// and leaves `in` at the payload. Checks that the file holds exactly the payload the
/// header announces and that it fits in memory.
inline npy_header read_npy_header(std::istream& in, std::uintmax_t file_size, const std::string& path)
{
    unsigned char magic[8];
    if (!in.read(reinterpret_cast<char*>(magic), 8))
    {
        throw input_error(path, "not an NPY file (shorter than the 8-byte magic string)");
    }
    if (std::memcmp(magic, "\x93NUMPY", 6) != 0)
    {
        throw input_error(path, "not an NPY file (bad magic string)");
    }
    const unsigned major = magic[6];
    std::size_t header_len = 0;
    std::size_t prefix = 0;
    if (major == 1)
    {
        unsigned char len[2];
        if (!in.read(reinterpret_cast<char*>(len), 2))
        {
            throw input_error(path, "corrupt NPY file (truncated header length)");
        }
        header_len = static_cast<std::size_t>(len[0]) | (static_cast<std::size_t>(len[1]) << 8);
        prefix = 10;
    }
    else if (major == 2 || major == 3)
    {
        unsigned char len[4];
        if (!in.read(reinterpret_cast<char*>(len), 4))
        {
            throw input_error(path, "corrupt NPY file (truncated header length)");
        }
        header_len = static_cast<std::size_t>(len[0]) | (static_cast<std::size_t>(len[1]) << 8)
                     | (static_cast<std::size_t>(len[2]) << 16) | (static_cast<std::size_t>(len[3]) << 24);
        prefix = 12;
    }
    else
    {
        throw input_error(path, "unsupported NPY format version " + std::to_string(major) + "."
                                    + std::to_string(static_cast<unsigned>(magic[7])));
    }
    if (prefix + header_len > file_size)
    {
        throw input_error(path, "corrupt NPY file (header runs past the end of the file)");
    }
    if (header_len > npy_max_header_bytes)
    {
        throw input_error(path, "corrupt NPY file (a header of " + std::to_string(header_len)
                                    + " bytes; at most " + std::to_string(npy_max_header_bytes) + " are accepted)");
    }
    std::string text(header_len, '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(header_len)))
    {
        throw input_error(path, "corrupt NPY file (truncated header)");
    }
    npy_header h = detail::header_parser(text, path).parse();
    h.data_offset = prefix + header_len;

    if (h.descr.size() < 2)
    {
        throw input_error(path, "unsupported dtype '" + h.descr + "'");
    }
    const char order = h.descr[0];
    const std::string kind = h.descr.substr(1);
    const bool known = kind == "f4" || kind == "f8" || kind == "i4" || kind == "i8";
    if (known && order == '>')
    {
        throw input_error(path, "big-endian dtype '" + h.descr + "' is not supported (only little-endian)");
    }
    if (!known || (order != '<' && order != '='))
    {
        throw input_error(path, "unsupported dtype '" + h.descr
                                    + "' (expected float32/float64 for vectors, int32/int64 for columns)");
    }
    h.dtype = kind == "f4" ? npy_dtype::float32 : kind == "f8" ? npy_dtype::float64
              : kind == "i4"   ? npy_dtype::int32
                               : npy_dtype::int64;
    std::size_t count = 1;
    std::size_t non_trivial = 0;
    for (std::size_t extent : h.shape)
    {
        if (extent != 0 && count > std::numeric_limits<std::size_t>::max() / extent)
        {
            throw input_error(path, "corrupt NPY header (shape overflows)");
        }
        count *= extent;
        non_trivial += extent > 1 ? 1 : 0;
    }
    h.count = count;
    if (h.fortran_order && non_trivial > 1)
    {
        throw input_error(path, "Fortran-order (column-major) arrays are not supported; save it in C order");
    }
    const std::size_t item = dtype_size(h.dtype);
    if (count > (std::numeric_limits<std::uintmax_t>::max() - h.data_offset) / item)
    {
        throw input_error(path, "corrupt NPY header (shape overflows)");
    }
    const std::uintmax_t payload = static_cast<std::uintmax_t>(count) * item;
    const std::uintmax_t expected = h.data_offset + payload;
    if (file_size < expected)
    {
        throw input_error(path, "truncated: the header announces " + std::to_string(payload)
                                    + " bytes of data but the file holds "
                                    + std::to_string(file_size - h.data_offset));
    }
    if (file_size > expected)
    {
        throw input_error(path, "corrupt: " + std::to_string(file_size - expected)
                                    + " bytes follow the data the header announces");
    }
    const std::uintmax_t memory = physical_memory_bytes();
    if (payload > memory)
    {
        throw input_error(path, "the header announces " + detail::gib(payload) + " of data, more than this machine's "
                                    + detail::gib(memory) + " of memory");
    }
    return h;
}

/// Opens `path` (a regular file; every other case is reported in words) and reads its
/// header; `in` is left at the payload.
inline npy_header open_npy(std::ifstream& in, const std::string& path)
{
    const path_info info = inspect_path(path, "file");
    if (!info.exists)
    {
        throw input_error(path, info.problem);
    }
    if (info.is_directory)
    {
        throw input_error(path, "is a directory, not an NPY file");
    }
    if (!info.is_regular)
    {
        throw input_error(path, "is " + info.kind + ", not an NPY file");
    }
    in.open(path, std::ios::binary);
    if (!in)
    {
        const int err = errno;
        throw input_error(path, err == EACCES ? std::string("permission denied (the file cannot be read)")
                                              : "cannot open: " + errno_text(err));
    }
    return read_npy_header(in, info.size, path);
}

namespace detail
{
    inline std::string shape_string(const std::vector<std::size_t>& shape)
    {
        std::string s = "(";
        for (std::size_t i = 0; i < shape.size(); ++i)
        {
            s += std::to_string(shape[i]);
            if (shape.size() == 1 || i + 1 < shape.size())
            {
                s += shape.size() == 1 ? "," : ", ";
            }
        }
        return s + ")";
    }

    template <class T>
    void read_payload(std::istream& in, T* out, std::size_t count, const std::string& path)
    {
        if (count > 0 && !in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(count * sizeof(T))))
        {
            throw input_error(path, "read error in the data");
        }
    }

    template <class From, class To>
    void read_converted(std::istream& in, To* out, std::size_t count, const std::string& path)
    {
        constexpr std::size_t chunk = 1 << 16;
        std::vector<From> buffer(std::min(count, chunk));
        for (std::size_t done = 0; done < count;)
        {
            const std::size_t now = std::min(chunk, count - done);
            read_payload(in, buffer.data(), now, path);
            for (std::size_t i = 0; i < now; ++i)
            {
                out[done + i] = static_cast<To>(buffer[i]);
            }
            done += now;
        }
    }
}  // namespace detail

/// Marks "any length" for read_int_column's expected_n.
inline constexpr std::size_t any_length = static_cast<std::size_t>(-1);

/// The payload of an int32 or int64 column of shape [n] (n = expected_n unless it is
/// any_length; `expected_from` names where n comes from), as int64. `in` is at the payload.
inline xt::xtensor<std::int64_t, 1> read_int_column(std::istream& in, const npy_header& h, const std::string& path,
                                                    std::size_t expected_n, const std::string& expected_from)
{
    if (is_float(h.dtype))
    {
        throw input_error(path, std::string("wrong dtype ") + dtype_name(h.dtype) + " ('" + h.descr
                                    + "'); expected int32 or int64");
    }
    if (h.shape.size() != 1)
    {
        throw input_error(path, "wrong rank: shape " + detail::shape_string(h.shape) + " has "
                                    + std::to_string(h.shape.size()) + " dimensions, expected 1 ([n])");
    }
    if (expected_n != any_length && h.shape[0] != expected_n)
    {
        throw input_error(path, "length mismatch: " + std::to_string(h.shape[0]) + " entries, but " + expected_from
                                    + " has " + std::to_string(expected_n) + " rows");
    }
    xt::xtensor<std::int64_t, 1> out = xt::xtensor<std::int64_t, 1>::from_shape({h.shape[0]});
    if (h.dtype == npy_dtype::int64)
    {
        detail::read_payload(in, out.data(), h.count, path);
    }
    else
    {
        detail::read_converted<std::int32_t>(in, out.data(), h.count, path);
    }
    return out;
}

/// The int column in the file `path`.
inline xt::xtensor<std::int64_t, 1> read_int_column(const std::string& path, std::size_t expected_n,
                                                    const std::string& expected_from)
{
    std::ifstream in;
    const npy_header h = open_npy(in, path);
    return read_int_column(in, h, path, expected_n, expected_from);
}

/// The largest head dimension d accepted: the analysis forms d x d covariance matrices per
/// query bucket, so d is bounded before anything is allocated (real heads have d <= 256).
inline constexpr std::size_t max_head_dim = 16384;

/// Checks that `h` describes vectors: float32/float64 of shape [n, d], 0 < d <= max_head_dim.
inline void check_vector_header(const npy_header& h, const std::string& path)
{
    if (!is_float(h.dtype))
    {
        throw input_error(path, std::string("wrong dtype ") + dtype_name(h.dtype) + " ('" + h.descr
                                    + "'); expected float32 or float64");
    }
    if (h.shape.size() != 2)
    {
        throw input_error(path, "wrong rank: shape " + detail::shape_string(h.shape) + " has "
                                    + std::to_string(h.shape.size()) + " dimensions, expected 2 ([n, d])");
    }
    if (h.shape[1] == 0)
    {
        throw input_error(path, "vectors have d = 0 columns");
    }
    if (h.shape[1] > max_head_dim)
    {
        throw input_error(path, "vectors have d = " + std::to_string(h.shape[1]) + " columns, more than the limit "
                                    + std::to_string(max_head_dim) + " of a head dimension");
    }
}

namespace detail
{
    /// Every value of the n x d vectors at `data` (count = n d) is finite; otherwise
    /// input_error naming `path`, the value, its row and column.
    /// The values are counted by blocks without a branch per value (the exponent's bits all
    /// set: an infinity or a NaN), a loop the compiler vectorizes, at the speed of memory; a
    /// block with one is read again for the first.
    template <class T>
    void check_finite_vectors(const T* data, std::size_t count, std::size_t d, const std::string& path)
    {
        static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double vectors");
        using bits_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
        constexpr bits_type exponent =
            sizeof(T) == 4 ? bits_type(0x7f800000u) : static_cast<bits_type>(0x7ff0000000000000ull);
        constexpr std::size_t block = 4096;
        for (std::size_t start = 0; start < count; start += block)
        {
            const std::size_t end = std::min(count, start + block);
            std::size_t non_finite = 0;
            for (std::size_t k = start; k < end; ++k)
            {
                bits_type bits;
                std::memcpy(&bits, data + k, sizeof bits);
                non_finite += static_cast<std::size_t>((bits & exponent) == exponent);
            }
            if (non_finite == 0)
            {
                continue;
            }
            for (std::size_t k = start; k < end; ++k)
            {
                if (!std::isfinite(data[k]))
                {
                    std::ostringstream msg;
                    msg << "non-finite value (" << static_cast<double>(data[k]) << ") at row " << k / d << ", column "
                        << k % d;
                    throw input_error(path, msg.str());
                }
            }
        }
    }
}  // namespace detail

/// The payload of vectors (check_vector_header(h) passed) in their own precision; every
/// value must be finite.
template <class T>
xt::xtensor<T, 2> read_vectors_as(std::istream& in, const npy_header& h, const std::string& path)
{
    xt::xtensor<T, 2> out = xt::xtensor<T, 2>::from_shape({h.shape[0], h.shape[1]});
    detail::read_payload(in, out.data(), h.count, path);
    detail::check_finite_vectors(out.data(), h.count, h.shape[1], path);
    return out;
}

/// The vectors of one NPY file (float32 or float64 [n, d], C order, every value finite), held
/// in place in a read-only mapping of the file (mapped_file.hpp) when it can be mapped, else
/// read into a buffer of their own. Move-only; the pointers and views it gives are valid as
/// long as it (or the object it is moved into) lives.
class npy_vectors
{
public:
    npy_vectors() = default;

    npy_dtype dtype() const noexcept { return m_dtype; }
    std::size_t rows() const noexcept { return m_rows; }
    std::size_t cols() const noexcept { return m_cols; }
    /// Whether the vectors are read in place from a mapping of the file.
    bool mapped() const noexcept { return m_mapping.valid(); }

    /// The n x d values, row-major; T must be the file's type (float for float32, double for
    /// float64), otherwise std::logic_error.
    template <class T>
    const T* data() const
    {
        static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "vectors are float or double");
        if (m_dtype != (std::is_same_v<T, float> ? npy_dtype::float32 : npy_dtype::float64))
        {
            throw std::logic_error(std::string("npy_vectors::data: the vectors are ") + dtype_name(m_dtype));
        }
        if (m_mapping.valid())
        {
            return reinterpret_cast<const T*>(m_mapping.data() + m_offset);
        }
        if constexpr (std::is_same_v<T, float>)
        {
            return m_f32.data();
        }
        else
        {
            return m_f64.data();
        }
    }

private:
    friend npy_vectors read_vectors(const std::string& path);

    npy_dtype m_dtype = npy_dtype::float32;
    std::size_t m_rows = 0;
    std::size_t m_cols = 0;
    mapped_file m_mapping;      // the whole file, when mapped
    std::size_t m_offset = 0;   // of the payload in the mapping
    xt::xtensor<float, 2> m_f32;   // the payload, when not mapped
    xt::xtensor<double, 2> m_f64;
};

/// The vectors in the file `path`, with the checks of open_npy, check_vector_header and
/// read_vectors_as and their messages. The file's size is validated against its header before
/// it is mapped, so a truncated file is the same input_error whether mapped or read. Mapped
/// only when the payload is aligned for its type (NumPy aligns it to 64 bytes; a hand-made
/// header may not), else read.
inline npy_vectors read_vectors(const std::string& path)
{
    std::ifstream in;
    const npy_header h = open_npy(in, path);
    check_vector_header(h, path);
    npy_vectors out;
    out.m_dtype = h.dtype;
    out.m_rows = h.shape[0];
    out.m_cols = h.shape[1];
    const std::size_t item = dtype_size(h.dtype);
    if (h.data_offset % item == 0)
    {
        out.m_mapping = mapped_file::map(path, h.data_offset + h.count * item);
        out.m_offset = h.data_offset;
    }
    if (out.m_mapping.valid())
    {
        in.close();
        if (h.dtype == npy_dtype::float32)
        {
            detail::check_finite_vectors(out.data<float>(), h.count, h.shape[1], path);
        }
        else
        {
            detail::check_finite_vectors(out.data<double>(), h.count, h.shape[1], path);
        }
    }
    else if (h.dtype == npy_dtype::float32)
    {
        out.m_f32 = read_vectors_as<float>(in, h, path);
    }
    else
    {
        out.m_f64 = read_vectors_as<double>(in, h, path);
    }
    return out;
}
}  // namespace attention_plasticity::io

#endif
