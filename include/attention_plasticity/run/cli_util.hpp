#ifndef ATTENTION_PLASTICITY_RUN_CLI_UTIL_HPP
#define ATTENTION_PLASTICITY_RUN_CLI_UTIL_HPP

// Strict parsing of option values shared by ap_analyze and ap_synth: the whole text must be
// the number (or the list of numbers and ranges), in range; otherwise usage_error naming the
// option. And --version, the same in every program.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include "../version.hpp"
#include "errors.hpp"

namespace attention_plasticity::run
{
/// Whether the command line asks for the version: --version anywhere (before any other
/// checks, as --help). Every program then prints version_line() on stdout and exits 0.
inline bool asks_version(int argc, const char* const* argv)
{
    for (int i = 1; i < argc; ++i)
    {
        if (std::string(argv[i]) == "--version")
        {
            return true;
        }
    }
    return false;
}

/// "PROGRAM VERSION" (attention_plasticity/version.hpp), e.g. "ap_analyze 0.1.0".
inline std::string version_line(const std::string& program)
{
    return program + " " + attention_plasticity::version;
}

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
    if (errno == ERANGE && std::isfinite(value) && std::fabs(value) < std::numeric_limits<double>::min())
    {
        // Underflow: strtod gives a subnormal or 0 and ERANGE; the number is finite but too small.
        throw usage_error(name + ": '" + raw
                          + "' is too small: its magnitude is below the smallest normal float64 "
                            "(2.2250738585072014e-308), where it would lose precision; give 0 or a larger value");
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
/// A set of indices written as numbers and inclusive ranges, "0-3,7" (the --layers and
/// --heads syntax). Kept as sorted, disjoint ranges: "0-4000000000" costs two numbers.
class index_set
{
public:
    using range = std::pair<std::uint64_t, std::uint64_t>;

    index_set() = default;
    explicit index_set(std::vector<range> ranges) : m_ranges(normalized(std::move(ranges))) {}

    bool contains(std::uint64_t i) const
    {
        for (const auto& [first, last] : m_ranges)
        {
            if (i < first)
            {
                return false;
            }
            if (i <= last)
            {
                return true;
            }
        }
        return false;
    }

    bool empty() const { return m_ranges.empty(); }
    std::uint64_t largest() const { return m_ranges.empty() ? 0 : m_ranges.back().second; }
    const std::vector<range>& ranges() const { return m_ranges; }

    /// How many indices (saturating at the largest std::uint64_t).
    std::uint64_t count() const
    {
        constexpr std::uint64_t most = std::numeric_limits<std::uint64_t>::max();
        std::uint64_t total = 0;
        for (const auto& [first, last] : m_ranges)
        {
            const std::uint64_t span = last - first;  // the range holds span + 1 indices
            if (span == most || total > most - span - 1)
            {
                return most;
            }
            total += span + 1;
        }
        return total;
    }

    /// Canonical text: "0-3,7".
    std::string text() const
    {
        std::string s;
        for (const auto& [first, last] : m_ranges)
        {
            s += (s.empty() ? "" : ",") + std::to_string(first);
            if (last != first)
            {
                s += (last == first + 1 ? "," : "-") + std::to_string(last);
            }
        }
        return s;
    }

private:
    static std::vector<range> normalized(std::vector<range> ranges)
    {
        std::sort(ranges.begin(), ranges.end());
        std::vector<range> merged;
        for (const auto& r : ranges)
        {
            if (!merged.empty() && (r.first <= merged.back().second
                                    || (merged.back().second != std::numeric_limits<std::uint64_t>::max()
                                        && r.first == merged.back().second + 1)))
            {
                merged.back().second = std::max(merged.back().second, r.second);
            }
            else
            {
                merged.push_back(r);
            }
        }
        return merged;
    }

    std::vector<range> m_ranges;
};

/// Parses "0-3,7" (spaces allowed around items); every index <= max_index.
inline index_set parse_index_set(const std::string& name, const std::string& raw, std::uint64_t max_index)
{
    if (trim(raw).empty())
    {
        throw usage_error(name + ": missing value (expected indices such as 0-3,7)");
    }
    std::vector<index_set::range> ranges;
    std::size_t start = 0;
    while (true)
    {
        const std::size_t comma = raw.find(',', start);
        const std::string item = trim(raw.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (item.empty())
        {
            throw usage_error(name + ": '" + raw + "' has an empty item (expected indices such as 0-3,7)");
        }
        const std::size_t dash = item.find('-');
        if (dash == 0)
        {
            throw usage_error(name + ": '" + item + "' is not a non-negative index");
        }
        if (dash == std::string::npos)
        {
            const std::uint64_t i = parse_unsigned(name, item, 0, max_index);
            ranges.emplace_back(i, i);
        }
        else
        {
            const std::uint64_t first = parse_unsigned(name, item.substr(0, dash), 0, max_index);
            const std::uint64_t last = parse_unsigned(name, item.substr(dash + 1), 0, max_index);
            if (last < first)
            {
                throw usage_error(name + ": '" + item + "' is a descending range (write " + std::to_string(last) + "-"
                                  + std::to_string(first) + ")");
            }
            ranges.emplace_back(first, last);
        }
        if (comma == std::string::npos)
        {
            break;
        }
        start = comma + 1;
    }
    return index_set(std::move(ranges));
}
}  // namespace attention_plasticity::run

#endif
