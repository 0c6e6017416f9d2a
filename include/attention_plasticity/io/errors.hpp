#ifndef ATTENTION_PLASTICITY_IO_ERRORS_HPP
#define ATTENTION_PLASTICITY_IO_ERRORS_HPP

// The errors of the io layer (reading dumps, writing tables).

#include <stdexcept>
#include <string>
#include <utility>

namespace attention_plasticity::io
{
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
}  // namespace attention_plasticity::io

#endif
