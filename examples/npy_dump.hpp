#ifndef AP_EXAMPLES_NPY_DUMP_HPP
#define AP_EXAMPLES_NPY_DUMP_HPP

// Reading a qk-sniffer dump in the NPY layout of SPEC §1:
//
//   <data_root>/l{LL}h{HH}{q|k}/vector.npy          float32 or float64 [n, d]
//                              /position.npy        int32 or int64 [n]
//                              /bucket.npy          int32 or int64 [n]
//                              /example_id.npy      int32 or int64 [n]
//                              /sliding_window.npy  optional, int32 or int64 [n]
//
// The NPY header is parsed here (magic, version 1/2/3, the dict with descr, fortran_order
// and shape) so that the loader can dispatch on the dtype and name the file and the
// problem for anything unexpected; the payload is then read straight into an xtensor
// container. xt::load_npy is not used for reading: it does not notice a truncated
// payload, and it mis-reads 1.0 headers whose length has a low byte >= 0x80 (the bytes
// are sign-extended chars). Writing (ap_synth) uses xt::dump_npy.
//
// Every problem throws input_error{file, reason}.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <attention_plasticity/pipeline.hpp>

namespace ap_examples
{
namespace fs = std::filesystem;

/// A problem with one input file (or folder): `file` names it, `reason` says what is wrong.
class input_error : public std::runtime_error
{
public:
    input_error(std::string file, std::string reason)
        : std::runtime_error(file + ": " + reason), m_file(std::move(file)), m_reason(std::move(reason))
    {
    }

    const std::string& file() const noexcept { return m_file; }
    const std::string& reason() const noexcept { return m_reason; }

private:
    std::string m_file;
    std::string m_reason;
};

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

/// Opens `path` and parses its NPY header; leaves the stream at the payload. Checks that the
/// file holds exactly the payload the header announces.
inline npy_header read_npy_header(std::ifstream& in, const std::string& path)
{
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status))
    {
        throw input_error(path, "file not found");
    }
    if (fs::is_directory(status))
    {
        throw input_error(path, "is a directory, not an NPY file");
    }
    const std::uintmax_t file_size = fs::file_size(path, ec);
    if (ec)
    {
        throw input_error(path, "cannot read its size: " + ec.message());
    }
    in.open(path, std::ios::binary);
    if (!in)
    {
        throw input_error(path, std::string("cannot open: ") + std::strerror(errno));
    }
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
    const std::uintmax_t expected = h.data_offset + static_cast<std::uintmax_t>(count) * item;
    if (file_size < expected)
    {
        throw input_error(path, "truncated: the header announces " + std::to_string(count * item)
                                    + " bytes of data but the file holds "
                                    + std::to_string(file_size - h.data_offset));
    }
    if (file_size > expected)
    {
        throw input_error(path, "corrupt: " + std::to_string(file_size - expected)
                                    + " bytes follow the data the header announces");
    }
    return h;
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
    void read_payload(std::ifstream& in, T* out, std::size_t count, const std::string& path)
    {
        if (count > 0 && !in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(count * sizeof(T))))
        {
            throw input_error(path, "read error in the data");
        }
    }

    template <class From, class To>
    void read_converted(std::ifstream& in, To* out, std::size_t count, const std::string& path)
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

/// An int32 or int64 column of shape [n] (n = expected_n unless expected_n is npos), as int64.
inline xt::xtensor<std::int64_t, 1> read_int_column(const std::string& path, std::size_t expected_n,
                                                    const std::string& expected_from)
{
    std::ifstream in;
    const npy_header h = read_npy_header(in, path);
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
    if (expected_n != static_cast<std::size_t>(-1) && h.shape[0] != expected_n)
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

/// vector.npy of shape [n, d] in its own precision; every value must be finite.
template <class T>
xt::xtensor<T, 2> read_vectors_as(std::ifstream& in, const npy_header& h, const std::string& path)
{
    xt::xtensor<T, 2> out = xt::xtensor<T, 2>::from_shape({h.shape[0], h.shape[1]});
    detail::read_payload(in, out.data(), h.count, path);
    const std::size_t d = h.shape[1];
    const T* data = out.data();
    for (std::size_t k = 0; k < h.count; ++k)
    {
        if (!std::isfinite(data[k]))
        {
            std::ostringstream msg;
            msg << "non-finite value (" << static_cast<double>(data[k]) << ") at row " << k / d << ", column "
                << k % d;
            throw input_error(path, msg.str());
        }
    }
    return out;
}

/// One folder (l{LL}h{HH}q or ...k) of a dump, loaded. Exactly one of f32/f64 holds the data.
struct folder_data
{
    std::string folder;
    std::string vector_file;
    npy_dtype dtype = npy_dtype::float64;
    std::size_t n = 0;
    std::size_t d = 0;
    attention_plasticity::head_tokens<float> f32;
    attention_plasticity::head_tokens<double> f64;
    std::int64_t sliding_window = 0;   // queries only; 0 = none

    /// Bytes held, for the record.
    std::size_t bytes() const { return n * d * dtype_size(dtype) + 3 * n * sizeof(std::int64_t); }
};

inline std::string folder_name(const std::string& data_root, std::int64_t layer, std::int64_t head, char kind)
{
    char name[32];
    std::snprintf(name, sizeof(name), "l%02lldh%02lld%c", static_cast<long long>(layer), static_cast<long long>(head),
                  kind);
    return (fs::path(data_root) / name).string();
}

/// Loads one folder. `with_sliding_window`: also read the optional sliding_window.npy
/// (query folders). Throws input_error naming the file for every violation of SPEC §1.
inline folder_data load_folder(const std::string& folder, bool with_sliding_window)
{
    folder_data out;
    out.folder = folder;
    std::error_code ec;
    if (!fs::exists(folder, ec))
    {
        throw input_error(folder, "folder not found");
    }
    if (!fs::is_directory(folder, ec))
    {
        throw input_error(folder, "is not a folder");
    }
    out.vector_file = (fs::path(folder) / "vector.npy").string();
    const std::string& vpath = out.vector_file;
    {
        std::ifstream in;
        const npy_header h = read_npy_header(in, vpath);
        if (!is_float(h.dtype))
        {
            throw input_error(vpath, std::string("wrong dtype ") + dtype_name(h.dtype) + " ('" + h.descr
                                         + "'); expected float32 or float64");
        }
        if (h.shape.size() != 2)
        {
            throw input_error(vpath, "wrong rank: shape " + detail::shape_string(h.shape) + " has "
                                         + std::to_string(h.shape.size()) + " dimensions, expected 2 ([n, d])");
        }
        if (h.shape[1] == 0)
        {
            throw input_error(vpath, "vectors have d = 0 columns");
        }
        out.dtype = h.dtype;
        out.n = h.shape[0];
        out.d = h.shape[1];
        if (h.dtype == npy_dtype::float32)
        {
            out.f32.vectors = read_vectors_as<float>(in, h, vpath);
        }
        else
        {
            out.f64.vectors = read_vectors_as<double>(in, h, vpath);
        }
    }
    const std::string from = "vector.npy";
    auto column = [&](const char* name) {
        return read_int_column((fs::path(folder) / name).string(), out.n, from);
    };
    auto position = column("position.npy");
    for (std::size_t i = 0; i < position.size(); ++i)
    {
        if (position(i) < 0)
        {
            throw input_error((fs::path(folder) / "position.npy").string(),
                              "negative position " + std::to_string(position(i)) + " at row " + std::to_string(i));
        }
    }
    auto bucket = column("bucket.npy");
    auto example_id = column("example_id.npy");
    if (with_sliding_window)
    {
        const std::string sw_path = (fs::path(folder) / "sliding_window.npy").string();
        if (fs::exists(sw_path, ec))
        {
            const auto sw = read_int_column(sw_path, out.n, from);
            std::int64_t window = 0;
            std::size_t first_row = 0;
            for (std::size_t i = 0; i < sw.size(); ++i)
            {
                if (sw(i) <= 0)
                {
                    continue;
                }
                if (window == 0)
                {
                    window = sw(i);
                    first_row = i;
                }
                else if (sw(i) != window)
                {
                    throw input_error(sw_path, "two different positive sliding windows: " + std::to_string(window)
                                                   + " (row " + std::to_string(first_row) + ") and "
                                                   + std::to_string(sw(i)) + " (row " + std::to_string(i) + ")");
                }
            }
            out.sliding_window = window;
        }
    }
    if (out.dtype == npy_dtype::float32)
    {
        out.f32.position = std::move(position);
        out.f32.bucket = std::move(bucket);
        out.f32.example_id = std::move(example_id);
    }
    else
    {
        out.f64.position = std::move(position);
        out.f64.bucket = std::move(bucket);
        out.f64.example_id = std::move(example_id);
    }
    return out;
}

}  // namespace ap_examples

#endif
