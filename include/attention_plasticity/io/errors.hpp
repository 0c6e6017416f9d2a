#ifndef ATTENTION_PLASTICITY_IO_ERRORS_HPP
#define ATTENTION_PLASTICITY_IO_ERRORS_HPP

// The errors of the io layer (reading dumps, writing tables).

#include <stdexcept>
#include <string>
#include <utility>

namespace attention_plasticity::io
{
/// A problem with one file (or folder): `file` names it, `reason` says what is wrong; what()
/// is "file: reason".
class file_error : public std::runtime_error
{
public:
    file_error(std::string file, std::string reason)
        : std::runtime_error(file + ": " + reason), m_file(std::move(file)), m_reason(std::move(reason))
    {
    }

    const std::string& file() const noexcept { return m_file; }
    const std::string& reason() const noexcept { return m_reason; }

private:
    std::string m_file;
    std::string m_reason;
};

/// A problem with one input file (or folder): `file` names it, `reason` says what is wrong.
class input_error : public file_error
{
public:
    using file_error::file_error;
};

/// A file or folder that cannot be written (a full disk, permissions): `file` names it,
/// `reason` says what failed.
class output_error : public file_error
{
public:
    using file_error::file_error;
};
}  // namespace attention_plasticity::io

#endif
