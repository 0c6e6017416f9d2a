// Unit tests of the NPY reader's vectors read in place (include/attention_plasticity/io/
// npy_reader.hpp read_vectors, mapped_file.hpp, npy_dump.hpp load_folder): the values from a
// mapping and from a read are those written; the bad inputs give the reader's messages, mapped
// or not; the mapping lives exactly as long as its owner. The files are written here byte by
// byte (the NPY 1.0 format as NumPy documents it), not by the code under test; the values are
// closed forms of (row, column).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <attention_plasticity/io/npy_dump.hpp>
#include <attention_plasticity/io/npy_reader.hpp>

namespace
{
namespace fs = std::filesystem;
namespace io = attention_plasticity::io;

/// A fresh folder under the system's temporary folder, removed at the end of the test.
struct temp_folder
{
    fs::path path;

    explicit temp_folder(const std::string& name)
        : path(fs::temp_directory_path() / ("ap_test_npy_" + name + "_" + std::to_string(::getpid())))
    {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~temp_folder()
    {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
};

/// Sets AP_NPY_MMAP for the scope (mapped: unset; read: "off").
struct mapping_mode
{
    explicit mapping_mode(bool mapped)
    {
        if (mapped)
        {
            ::unsetenv("AP_NPY_MMAP");
        }
        else
        {
            ::setenv("AP_NPY_MMAP", "off", 1);
        }
    }
    ~mapping_mode() { ::unsetenv("AP_NPY_MMAP"); }
};

/// An NPY 1.0 file: magic, version, little-endian header length, the dict padded with spaces
/// and a newline so that the payload starts at `data_offset` (NumPy pads to a multiple of 64),
/// then the payload.
std::string npy_bytes(const std::string& descr, bool fortran, const std::string& shape, const std::string& payload,
                      std::size_t data_offset = 128)
{
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False")
                       + ", 'shape': " + shape + ", }";
    const std::size_t header_len = data_offset - 10;
    REQUIRE(dict.size() + 1 <= header_len);
    dict += std::string(header_len - dict.size() - 1, ' ') + "\n";
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(header_len & 0xff);
    out += static_cast<char>(header_len >> 8);
    return out + dict + payload;
}

/// The value at (i, j): exact in float and double.
double value_at(std::size_t i, std::size_t j) { return 10.0 * static_cast<double>(i) + 0.25 * static_cast<double>(j) - 3.0; }

template <class T>
std::string payload_of(std::size_t n, std::size_t d)
{
    std::vector<T> values(n * d);
    for (std::size_t i = 0; i < n; ++i)
    {
        for (std::size_t j = 0; j < d; ++j)
        {
            values[i * d + j] = static_cast<T>(value_at(i, j));
        }
    }
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <class T>
const char* descr_of()
{
    return std::is_same_v<T, float> ? "<f4" : "<f8";
}

void write_file(const fs::path& path, const std::string& bytes)
{
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The message of the input_error `f` throws ("" if none).
template <class F>
std::string error_of(F&& f)
{
    try
    {
        f();
    }
    catch (const io::input_error& e)
    {
        return e.what();
    }
    return "";
}

/// Whether `path` is mapped into this process now (/proc/self/maps names mapped files).
bool is_mapped(const fs::path& path)
{
    std::ifstream maps("/proc/self/maps");
    std::string line;
    const std::string name = fs::canonical(path).string();
    while (std::getline(maps, line))
    {
        if (line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0)
        {
            return true;
        }
    }
    return false;
}

template <class T>
void check_values(const io::npy_vectors& v, std::size_t n, std::size_t d)
{
    REQUIRE(v.rows() == n);
    REQUIRE(v.cols() == d);
    const T* data = v.data<T>();
    for (std::size_t i = 0; i < n; ++i)
    {
        for (std::size_t j = 0; j < d; ++j)
        {
            REQUIRE(data[i * d + j] == static_cast<T>(value_at(i, j)));
        }
    }
}
}  // namespace

TEMPLATE_TEST_CASE("read_vectors: the values in place from a mapping, and read when mapping is off", "[npy]", float,
                   double)
{
    temp_folder dir("values");
    const fs::path file = dir.path / "vector.npy";
    const std::size_t n = 37, d = 5;
    write_file(file, npy_bytes(descr_of<TestType>(), false, "(37, 5)", payload_of<TestType>(n, d)));
    for (const bool mapped : {true, false})
    {
        mapping_mode mode(mapped);
        const io::npy_vectors v = io::read_vectors(file.string());
        CHECK(v.mapped() == mapped);
        CHECK(v.dtype() == (std::is_same_v<TestType, float> ? io::npy_dtype::float32 : io::npy_dtype::float64));
        check_values<TestType>(v, n, d);
        using other = std::conditional_t<std::is_same_v<TestType, float>, double, float>;
        CHECK_THROWS_AS(v.data<other>(), std::logic_error);
    }
}

TEMPLATE_TEST_CASE("read_vectors: a payload not aligned for its type is read, with the same values", "[npy]", float,
                   double)
{
    // A hand-made header may put the payload at any offset; a float or double read from a
    // misaligned address is undefined behaviour, so such a file is read, not mapped.
    temp_folder dir("misaligned");
    const fs::path file = dir.path / "vector.npy";
    write_file(file, npy_bytes(descr_of<TestType>(), false, "(6, 3)", payload_of<TestType>(6, 3), 127));
    const io::npy_vectors v = io::read_vectors(file.string());
    CHECK_FALSE(v.mapped());
    check_values<TestType>(v, 6, 3);
}

TEMPLATE_TEST_CASE("read_vectors: a sparse file (holes) is read, not mapped, with its zeros", "[npy]", float, double)
{
    // A valid file whose payload was never written (a header, then the file extended by
    // resize_file): its pages are holes. Touching a hole of a mapping makes the file system
    // allocate it, which on a full tmpfs is SIGBUS; read() returns the zeros without
    // allocating (mapped_file.hpp; the full-tmpfs run itself: tests/e2e/test_disk_full.py).
    temp_folder dir("sparse");
    const fs::path sparse = dir.path / "vector.npy";
    const std::size_t n = 4096, d = 4;  // payload 64 or 128 KiB: many pages of holes
    const std::size_t size = 128 + n * d * sizeof(TestType);
    write_file(sparse, npy_bytes(descr_of<TestType>(), false, "(4096, 4)", ""));
    fs::resize_file(sparse, size);
    struct stat st
    {
    };
    REQUIRE(::stat(sparse.c_str(), &st) == 0);
    // The file system made holes (fewer bytes allocated than the size): the case under test.
    INFO("the temporary folder's file system allocated " << st.st_blocks * 512 << " bytes for a file of " << size);
    REQUIRE(static_cast<std::uintmax_t>(st.st_blocks) * 512 < size);
    const io::npy_vectors v = io::read_vectors(sparse.string());
    CHECK_FALSE(v.mapped());
    REQUIRE(v.rows() == n);
    REQUIRE(v.cols() == d);
    const TestType* data = v.data<TestType>();
    CHECK(std::all_of(data, data + n * d, [](TestType x) { return x == TestType(0); }));

    // The same values written out (no hole): mapped, as every dense file.
    const fs::path dense = dir.path / "dense.npy";
    write_file(dense, npy_bytes(descr_of<TestType>(), false, "(4096, 4)", std::string(n * d * sizeof(TestType), '\0')));
    CHECK(io::read_vectors(dense.string()).mapped());

    // The decision itself on open files: a hole anywhere in the range counts, also one after
    // written data; the written file has none.
    const fs::path tail_hole = dir.path / "tail_hole.npy";
    write_file(tail_hole, npy_bytes(descr_of<TestType>(), false, "(4096, 4)", std::string(16384, '\1')));
    fs::resize_file(tail_hole, size);
    for (const auto& [path, holes] : {std::pair<fs::path, bool>{sparse, true}, {dense, false}, {tail_hole, true}})
    {
        const int fd = ::open(path.c_str(), O_RDONLY);
        REQUIRE(fd >= 0);
        CHECK(io::file_has_holes(fd, size) == holes);
        ::close(fd);
    }
}

TEMPLATE_TEST_CASE("read_vectors: bad files give the reader's messages, mapped or read", "[npy]", float, double)
{
    temp_folder dir("bad");
    const std::string descr = descr_of<TestType>();
    const std::size_t item = sizeof(TestType);
    const std::string payload = payload_of<TestType>(4, 3);
    struct bad_case
    {
        std::string name;
        std::string bytes;
        std::string reason;
    };
    const std::vector<bad_case> cases = {
        {"truncated", npy_bytes(descr, false, "(4, 3)", payload.substr(0, 5 * item)),
         "truncated: the header announces " + std::to_string(12 * item) + " bytes of data but the file holds "
             + std::to_string(5 * item)},
        {"header_only", npy_bytes(descr, false, "(4, 3)", ""),
         "truncated: the header announces " + std::to_string(12 * item) + " bytes of data but the file holds 0"},
        {"trailing", npy_bytes(descr, false, "(4, 3)", payload + "xyz"),
         "corrupt: 3 bytes follow the data the header announces"},
        {"fortran", npy_bytes(descr, true, "(4, 3)", payload),
         "Fortran-order (column-major) arrays are not supported; save it in C order"},
        {"big_endian", npy_bytes(std::string(">") + descr.substr(1), false, "(4, 3)", payload),
         "big-endian dtype '>" + descr.substr(1) + "' is not supported (only little-endian)"},
        {"rank", npy_bytes(descr, false, "(12,)", payload),
         "wrong rank: shape (12,) has 1 dimensions, expected 2 ([n, d])"},
        {"int", npy_bytes("<i4", false, "(4, 3)", std::string(48, '\0')),
         "wrong dtype int32 ('<i4'); expected float32 or float64"},
    };
    for (const auto& c : cases)
    {
        const fs::path file = dir.path / (c.name + ".npy");
        write_file(file, c.bytes);
        for (const bool mapped : {true, false})
        {
            INFO(c.name << (mapped ? " (mapping on)" : " (mapping off)"));
            mapping_mode mode(mapped);
            CHECK(error_of([&] { (void)io::read_vectors(file.string()); }) == file.string() + ": " + c.reason);
        }
    }
}

TEMPLATE_TEST_CASE("read_vectors: a non-finite value is named by row and column, mapped or read", "[npy]", float,
                   double)
{
    temp_folder dir("nonfinite");
    const fs::path file = dir.path / "vector.npy";
    std::string payload = payload_of<TestType>(4, 3);
    const TestType nan = std::numeric_limits<TestType>::quiet_NaN();
    std::memcpy(&payload[(1 * 3 + 2) * sizeof(TestType)], &nan, sizeof(TestType));
    write_file(file, npy_bytes(descr_of<TestType>(), false, "(4, 3)", payload));
    for (const bool mapped : {true, false})
    {
        mapping_mode mode(mapped);
        CHECK(error_of([&] { (void)io::read_vectors(file.string()); })
              == file.string() + ": non-finite value (nan) at row 1, column 2");
    }
}

TEMPLATE_TEST_CASE("read_vectors: the first non-finite value in row order is named, in any block of the check",
                   "[npy]", float, double)
{
    // 3,000 x 3 values: the check counts them in blocks of 4,096 (values 0-4095, 4096-8191,
    // 8192-8999); each case puts non-finite values at the given indices, the first one named.
    temp_folder dir("nonfinite_blocks");
    const fs::path file = dir.path / "vector.npy";
    const TestType inf = std::numeric_limits<TestType>::infinity();
    const TestType nan = std::numeric_limits<TestType>::quiet_NaN();
    struct placed
    {
        std::vector<std::size_t> at;
        std::string named;
    };
    const std::vector<placed> cases = {
        {{0}, "(nan) at row 0, column 0"},
        {{4095, 4096}, "(nan) at row 1365, column 0"},      // the last value of the first block
        {{4096, 8191}, "(nan) at row 1365, column 1"},      // the first value of the second block
        {{8999}, "(nan) at row 2999, column 2"},            // the very last value
        {{5000, 5001, 8000}, "(nan) at row 1666, column 2"},  // several in one block: the first
    };
    for (const placed& c : cases)
    {
        std::string payload = payload_of<TestType>(3000, 3);
        for (std::size_t k = 0; k < c.at.size(); ++k)
        {
            const TestType value = k == 0 ? nan : (k % 2 ? inf : -inf);
            std::memcpy(&payload[c.at[k] * sizeof(TestType)], &value, sizeof(TestType));
        }
        write_file(file, npy_bytes(descr_of<TestType>(), false, "(3000, 3)", payload));
        for (const bool mapped : {true, false})
        {
            INFO(c.named << (mapped ? " (mapping on)" : " (mapping off)"));
            mapping_mode mode(mapped);
            CHECK(error_of([&] { (void)io::read_vectors(file.string()); })
                  == file.string() + ": non-finite value " + c.named);
        }
    }
    // Infinities of either sign are named too, and the largest finite values pass.
    std::string payload = payload_of<TestType>(3000, 3);
    const TestType big = std::numeric_limits<TestType>::max();
    for (const std::size_t k : {std::size_t{10}, std::size_t{6000}})
    {
        std::memcpy(&payload[k * sizeof(TestType)], &big, sizeof(TestType));
    }
    write_file(file, npy_bytes(descr_of<TestType>(), false, "(3000, 3)", payload));
    CHECK(io::read_vectors(file.string()).rows() == 3000);
    const TestType minus_inf = -inf;
    std::memcpy(&payload[7000 * sizeof(TestType)], &minus_inf, sizeof(TestType));
    write_file(file, npy_bytes(descr_of<TestType>(), false, "(3000, 3)", payload));
    CHECK(error_of([&] { (void)io::read_vectors(file.string()); })
          == file.string() + ": non-finite value (-inf) at row 2333, column 1");
}

TEMPLATE_TEST_CASE("load_folder: the mapping is owned by the folder and lives as long as it", "[npy]", float, double)
{
    temp_folder dir("folder");
    const fs::path folder = dir.path / "l00h00k";
    fs::create_directories(folder);
    const std::size_t n = 20, d = 4;
    write_file(folder / "vector.npy", npy_bytes(descr_of<TestType>(), false, "(20, 4)", payload_of<TestType>(n, d)));
    std::vector<std::int64_t> column(n);
    for (std::size_t i = 0; i < n; ++i)
    {
        column[i] = static_cast<std::int64_t>(i);
    }
    const std::string ints(reinterpret_cast<const char*>(column.data()), n * sizeof(std::int64_t));
    for (const char* name : {"position.npy", "bucket.npy", "example_id.npy"})
    {
        write_file(folder / name, npy_bytes("<i8", false, "(20,)", ints));
    }
    mapping_mode mode(true);
    std::shared_ptr<const io::folder_data> owner;
    {
        io::folder_data loaded = io::load_folder(folder.string(), false);
        REQUIRE(loaded.vectors.mapped());
        const TestType* before = loaded.vectors.data<TestType>();
        // Moved into its owner (as the head runner does): the same mapped bytes, still valid.
        owner = std::make_shared<const io::folder_data>(std::move(loaded));
        CHECK(owner->vectors.data<TestType>() == before);
    }
    CHECK(is_mapped(folder / "vector.npy"));
    const bool is_float = io::with_tokens(*owner, [](const auto& view) {
        return std::is_same_v<std::decay_t<decltype(view)>, attention_plasticity::tokens_view<float>>;
    });
    CHECK(is_float == std::is_same_v<TestType, float>);
    const attention_plasticity::tokens_view<TestType> view = owner->view<TestType>();
    REQUIRE(view.vectors.shape()[0] == n);
    REQUIRE(view.vectors.shape()[1] == d);
    for (std::size_t i = 0; i < n; ++i)
    {
        CHECK(view.position(i) == static_cast<std::int64_t>(i));
        for (std::size_t j = 0; j < d; ++j)
        {
            CHECK(view.vectors(i, j) == static_cast<TestType>(value_at(i, j)));
        }
    }
    owner.reset();  // the last owner: the mapping goes with it
    CHECK_FALSE(is_mapped(folder / "vector.npy"));
}
