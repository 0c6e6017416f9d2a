#ifndef ATTENTION_PLASTICITY_TESTS_RUN_RUN_FILES_HPP
#define ATTENTION_PLASTICITY_TESTS_RUN_RUN_FILES_HPP

// Helpers of the run layer's file tests: a fresh folder of its own under the system's
// temporary folder (removed at the end of the test), and whole files and links read and
// written with the standard library and POSIX only (never with the code under test), and the
// host name as a lock's owner line gives it; the message of an io::input_error.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <functional>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <attention_plasticity/io/errors.hpp>

namespace ap_test
{
/// A new folder (mkdtemp: unique even when tests run in parallel), removed with its content.
struct temp_folder
{
    std::filesystem::path path;

    explicit temp_folder(const std::string& name)
    {
        std::string pattern = (std::filesystem::temp_directory_path() / ("ap_test_" + name + "_XXXXXX")).string();
        if (::mkdtemp(pattern.data()) == nullptr)
        {
            throw std::runtime_error("mkdtemp " + pattern + " failed");
        }
        path = pattern;
    }
    temp_folder(const temp_folder&) = delete;
    temp_folder& operator=(const temp_folder&) = delete;
    ~temp_folder()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline std::string read_text(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_text(const std::filesystem::path& path, const std::string& text)
{
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

/// The text of a symbolic link, "" when `path` is none.
inline std::string link_text(const std::filesystem::path& path)
{
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(path, ec);
    return ec ? std::string() : target.string();
}

/// The names in a folder, sorted.
inline std::vector<std::string> names_in(const std::filesystem::path& folder)
{
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(folder))
    {
        names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}
/// This machine's name as the lock's owner line ("pid N on HOST") gives it: the tests expect a
/// plain name (letters, digits, '.', '-'), which the run layer writes unchanged.
inline std::string plain_host_name()
{
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof(buffer) - 1) != 0)
    {
        throw std::runtime_error("gethostname failed");
    }
    const std::string host = buffer;
    if (host.empty()
        || host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != std::string::npos)
    {
        throw std::runtime_error("host name '" + host + "' is not a plain name; these tests expect one");
    }
    return host;
}
/// The message of the io::input_error `f` throws ("" when none).
inline std::string input_error_of(const std::function<void()>& f)
{
    try
    {
        f();
    }
    catch (const attention_plasticity::io::input_error& e)
    {
        return e.what();
    }
    return "";
}
}  // namespace ap_test

#endif
