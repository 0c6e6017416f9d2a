#ifndef AP_EXAMPLES_CLI_UTIL_HPP
#define AP_EXAMPLES_CLI_UTIL_HPP

// Strict parsing of option values shared by ap_analyze and ap_synth: the whole text must be
// the number, in range; otherwise usage_error naming the option.

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

namespace ap_examples
{
/// A bad command line or configuration: exit status 2.
class usage_error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

inline std::string trim(const std::string& s)
{
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
    {
        return "";
    }
    const auto last = s.find_last_not_of(" \t\r\n");
    return s.substr(first, last - first + 1);
}

/// Non-negative integer in [min_value, max_value].
inline std::uint64_t parse_unsigned(const std::string& name, const std::string& raw, std::uint64_t min_value = 0,
                                    std::uint64_t max_value = std::numeric_limits<std::uint64_t>::max())
{
    const std::string text = trim(raw);
    if (text.empty())
    {
        throw usage_error(name + ": missing value (expected an integer)");
    }
    for (char c : text)
    {
        if (c < '0' || c > '9')
        {
            throw usage_error(name + ": '" + raw + "' is not a non-negative integer");
        }
    }
    errno = 0;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0')
    {
        throw usage_error(name + ": '" + raw + "' is out of range");
    }
    if (value < min_value || value > max_value)
    {
        std::string range = "must be >= " + std::to_string(min_value);
        if (max_value != std::numeric_limits<std::uint64_t>::max())
        {
            range += " and <= " + std::to_string(max_value);
        }
        throw usage_error(name + ": " + text + " " + range);
    }
    return value;
}

/// Finite real number in [min_value, max_value].
inline double parse_real(const std::string& name, const std::string& raw, double min_value, double max_value)
{
    const std::string text = trim(raw);
    if (text.empty())
    {
        throw usage_error(name + ": missing value (expected a number)");
    }
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0')
    {
        throw usage_error(name + ": '" + raw + "' is not a number");
    }
    if (errno == ERANGE || !std::isfinite(value))
    {
        throw usage_error(name + ": '" + raw + "' is not a finite number");
    }
    if (value < min_value || value > max_value)
    {
        char range[96];
        std::snprintf(range, sizeof(range), " must be in [%g, %g]", min_value, max_value);
        throw usage_error(name + ": " + text + range);
    }
    return value;
}
}  // namespace ap_examples

#endif
