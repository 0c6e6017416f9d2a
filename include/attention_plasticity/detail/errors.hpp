#ifndef ATTENTION_PLASTICITY_DETAIL_ERRORS_HPP
#define ATTENTION_PLASTICITY_DETAIL_ERRORS_HPP

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

namespace attention_plasticity
{
namespace detail
{
    // Builds "function: message" from any streamable pieces.
    template <class... Args>
    std::string message(const char* function, const Args&... args)
    {
        std::ostringstream out;
        out << function << ": ";
        (out << ... << args);
        return out.str();
    }

    template <class... Args>
    [[noreturn]] void throw_invalid(const char* function, const Args&... args)
    {
        throw std::invalid_argument(message(function, args...));
    }

    template <class... Args>
    [[noreturn]] void throw_domain(const char* function, const Args&... args)
    {
        throw std::domain_error(message(function, args...));
    }

    /// Throws std::invalid_argument unless e has `dimension` dimensions.
    template <class E>
    void require_dimension(const char* function, const char* name, const E& e, std::size_t dimension)
    {
        if (e.dimension() != dimension)
        {
            throw_invalid(function, name, " must be ", dimension, "-D, got ", e.dimension(), " dimensions");
        }
    }
}  // namespace detail
}  // namespace attention_plasticity

#endif
