#ifndef ATTENTION_PLASTICITY_IO_CONFIG_FILE_HPP
#define ATTENTION_PLASTICITY_IO_CONFIG_FILE_HPP

// The text of a small configuration file (a --config YAML, a model's config.json, a dump's
// metadata.json): a regular file of bounded size, read whole. The io layer's one reader of
// such files; the run layer names them by their option in its usage errors.

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>

#include "errors.hpp"
#include "fs_util.hpp"

namespace attention_plasticity::io
{
/// The largest configuration file accepted.
inline constexpr std::uintmax_t max_config_bytes = 1u << 20;

/// The text of the regular file `path` of at most `max_bytes` bytes; input_error(path, reason)
/// when it is absent, not a regular file, too large or cannot be read.
inline std::string read_config_text(const std::string& path, std::uintmax_t max_bytes = max_config_bytes)
{
    const path_info info = inspect_path(path, "file");
    if (!info.exists)
    {
        throw input_error(path, info.problem);
    }
    if (!info.is_regular)
    {
        throw input_error(path, "is " + info.kind + ", not a configuration file");
    }
    if (info.size > max_bytes)
    {
        throw input_error(path, std::to_string(info.size) + " bytes; a configuration file may have at most "
                                    + std::to_string(max_bytes));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in)
    {
        throw input_error(path, "cannot open: " + errno_text(errno));
    }
    std::string text;
    text.resize(static_cast<std::size_t>(info.size));
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (static_cast<std::uintmax_t>(in.gcount()) != info.size)
    {
        throw input_error(path, "read error");
    }
    return text;
}
}  // namespace attention_plasticity::io

#endif
