#ifndef ATTENTION_PLASTICITY_IO_NPY_DUMP_HPP
#define ATTENTION_PLASTICITY_IO_NPY_DUMP_HPP

// Loading one folder of a qk-sniffer dump in the NPY layout of docs/method.md §1:
//
//   <data_root>/l{LL}h{HH}{q|k}/vector.npy          float32 or float64 [n, d]
//                              /position.npy        int32 or int64 [n]
//                              /bucket.npy          int32 or int64 [n]
//                              /example_id.npy      int32 or int64 [n]
//                              /sliding_window.npy  optional, int32 or int64 [n]
//
// The files are read by npy_reader.hpp (the vectors in place, from a read-only mapping of
// vector.npy); which folders exist is dump_folder.hpp's, which heads to analyze run/dump_layout.hpp's. Every
// problem throws input_error{file, reason}.

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

#include "fs_util.hpp"
#include "npy_reader.hpp"

namespace attention_plasticity::io
{
namespace fs = std::filesystem;

/// One folder (l{LL}h{HH}q or ...k) of a dump, loaded: the vectors in place in a read-only
/// mapping of vector.npy (or read, when it cannot be mapped; npy_reader.hpp), the columns as
/// int64. Move-only: it owns the mapping, and the views it gives (view(), with_tokens) are
/// valid as long as it (or the object it is moved into) lives.
struct folder_data
{
    std::string folder;
    std::string vector_file;
    npy_dtype dtype = npy_dtype::float64;
    std::size_t n = 0;
    std::size_t d = 0;
    npy_vectors vectors;
    xt::xtensor<std::int64_t, 1> position;
    xt::xtensor<std::int64_t, 1> bucket;
    xt::xtensor<std::int64_t, 1> example_id;
    std::int64_t sliding_window = 0;   // queries only; 0 = none

    /// Bytes held, for the record.
    std::size_t bytes() const { return n * d * dtype_size(dtype) + 3 * n * sizeof(std::int64_t); }

    /// The tokens as the library's view; T is the vectors' type (float for float32, double for
    /// float64; otherwise std::logic_error). with_tokens picks it.
    template <class T>
    attention_plasticity::tokens_view<T> view() const
    {
        return attention_plasticity::tokens_view<T>{
            attention_plasticity::detail::const_view_of<T, 2>(vectors.data<T>(), {n, d}),
            attention_plasticity::detail::const_view_of<std::int64_t, 1>(position.data(), {position.size()}),
            attention_plasticity::detail::const_view_of<std::int64_t, 1>(bucket.data(), {bucket.size()}),
            attention_plasticity::detail::const_view_of<std::int64_t, 1>(example_id.data(), {example_id.size()})};
    }
};

/// use(folder.view<T>()) with T the type of the folder's vectors: a dump holds float32 or
/// float64 vectors, and the analysis takes either.
template <class F>
decltype(auto) with_tokens(const folder_data& folder, F&& use)
{
    return folder.dtype == npy_dtype::float32 ? use(folder.view<float>()) : use(folder.view<double>());
}

/// The largest position accepted: 2^53, the last integer from which every smaller one is a
/// float64 (positions enter the statistics as float64; a larger one would be rounded).
inline constexpr std::int64_t max_position = std::int64_t{1} << 53;

/// docs/method.md §1.1: every position (an int64 column) is >= 0 and at most 2^53; otherwise
/// input_error naming `file` (and, for a file of several columns, `column`: "column
/// 'position': ").
template <class E>
void check_positions(const E& position, const std::string& file, const std::string& column = "")
{
    for (std::size_t i = 0; i < position.size(); ++i)
    {
        if (position(i) < 0)
        {
            throw input_error(file, column + "negative position " + std::to_string(position(i)) + " at row "
                                        + std::to_string(i));
        }
        if (position(i) > max_position)
        {
            throw input_error(file, column + "position " + std::to_string(position(i)) + " at row "
                                        + std::to_string(i)
                                        + " is above 2^53 = 9007199254740992 (positions are computed with "
                                          "float64, which holds every integer only up to 2^53)");
        }
    }
}

/// docs/method.md §1.4: the sliding window of a query folder from its sliding_window column:
/// the single positive value, 0 (none) when there is none; two different positive values are
/// an input_error naming `file` (and `column`, as for check_positions).
template <class E>
std::int64_t sliding_window_of(const E& sw, const std::string& file, const std::string& column = "")
{
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
            throw input_error(file, column + "two different positive sliding windows: " + std::to_string(window)
                                        + " (row " + std::to_string(first_row) + ") and " + std::to_string(sw(i))
                                        + " (row " + std::to_string(i) + ")");
        }
    }
    return window;
}

/// Loads one folder. `with_sliding_window`: also read the optional sliding_window.npy
/// (query folders). Throws input_error naming the file for every violation of docs/method.md §1.
inline folder_data load_folder(const std::string& folder, bool with_sliding_window)
{
    folder_data out;
    out.folder = folder;
    const path_info info = inspect_path(folder, "folder");
    if (!info.exists)
    {
        throw input_error(folder, info.problem);
    }
    if (!info.is_directory)
    {
        throw input_error(folder, "is " + info.kind + ", not a folder");
    }
    if (const std::string problem = folder_access_problem(folder); !problem.empty())
    {
        throw input_error(folder, problem);
    }
    out.vector_file = (fs::path(folder) / "vector.npy").string();
    const std::string& vpath = out.vector_file;
    out.vectors = read_vectors(vpath);
    out.dtype = out.vectors.dtype();
    out.n = out.vectors.rows();
    out.d = out.vectors.cols();
    const std::string from = "vector.npy";
    auto column = [&](const char* name) {
        return read_int_column((fs::path(folder) / name).string(), out.n, from);
    };
    auto position = column("position.npy");
    check_positions(position, (fs::path(folder) / "position.npy").string());
    auto bucket = column("bucket.npy");
    auto example_id = column("example_id.npy");
    if (with_sliding_window)
    {
        const std::string sw_path = (fs::path(folder) / "sliding_window.npy").string();
        // Optional: absent is "no window"; anything else that is wrong with it is an error.
        if (!inspect_path(sw_path).absent)
        {
            out.sliding_window = sliding_window_of(read_int_column(sw_path, out.n, from), sw_path);
        }
    }
    out.position = std::move(position);
    out.bucket = std::move(bucket);
    out.example_id = std::move(example_id);
    return out;
}

}  // namespace attention_plasticity::io

#endif
