#ifndef ATTENTION_PLASTICITY_IO_DUMP_FOLDER_HPP
#define ATTENTION_PLASTICITY_IO_DUMP_FOLDER_HPP

// The folder format of a dump (docs/method.md §1): one sub-folder per captured (layer, head,
// kind), l{LL}h{HH}q for queries and l{LL}h{HH}k for keys (two-digit, zero-padded numbers;
// l100h07q past 99), and an optional metadata.json with the layout's counts. What is in a head's
// folder is npy_dump.hpp's; which heads to analyze, and the layout from the flags and the
// model's config, is the run layer's (run/dump_layout.hpp).
//
// Everything read from folder names and metadata.json is bounded (max_layout_count) before it
// is used, and nothing is allocated per head of the layout: only per folder present. Errors are
// input_error; the run layer turns them into its usage errors.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "config_file.hpp"
#include "errors.hpp"
#include "fs_util.hpp"

namespace attention_plasticity::io
{
/// Layers, query heads and key heads are each at most this many (indices below it).
inline constexpr std::size_t max_layout_count = 10000;

/// The dump's optional metadata: a JSON object with any of num_layers,
/// num_q_heads and num_k_heads (other keys are the capture's own and are ignored).
inline constexpr const char* dump_metadata_file = "metadata.json";

/// "l00h01q": the folder of (layer, head, kind) in a dump. kind is 'q' or 'k'.
inline std::string head_folder_name(std::size_t layer, std::size_t head, char kind)
{
    char name[64];
    std::snprintf(name, sizeof(name), "l%02zuh%02zu%c", layer, head, kind);
    return name;
}

inline std::string head_folder_path(const std::string& data_root, std::size_t layer, std::size_t head, char kind)
{
    return (std::filesystem::path(data_root) / head_folder_name(layer, head, kind)).string();
}

/// What a directory entry's name says: not a head folder, a head folder, or a name that
/// looks like one but cannot be used (`problem` says why).
struct parsed_folder_name
{
    bool is_head_folder = false;
    std::size_t layer = 0;
    std::size_t head = 0;
    char kind = 'q';
    std::string problem;
};

/// Parses l<digits>h<digits>{q|k}; numbers above max_layout_count - 1 and names that are
/// not in the dump's format (l0h0q, l000h00q) are problems, never numbers that overflow.
inline parsed_folder_name parse_head_folder_name(const std::string& name)
{
    parsed_folder_name out;
    std::size_t pos = 0;
    auto number = [&](const char* what, std::size_t& value) {
        const std::size_t start = pos;
        while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9')
        {
            ++pos;
        }
        const std::string digits = name.substr(start, pos - start);
        if (digits.empty())
        {
            return false;
        }
        value = 0;
        for (const char c : digits)
        {
            value = value * 10 + static_cast<std::size_t>(c - '0');
            if (value >= max_layout_count)
            {
                if (out.problem.empty())
                {
                    out.problem = std::string(what) + " number "
                                  + (digits.size() > 24 ? digits.substr(0, 24) + "..." : digits)
                                  + " is above the limit " + std::to_string(max_layout_count - 1);
                }
                break;
            }
        }
        return true;
    };
    if (name.empty() || name[0] != 'l')
    {
        return out;
    }
    pos = 1;
    if (!number("layer", out.layer) || pos >= name.size() || name[pos] != 'h')
    {
        return out;
    }
    ++pos;
    if (!number("head", out.head))
    {
        return out;
    }
    if (pos + 1 != name.size() || (name[pos] != 'q' && name[pos] != 'k'))
    {
        out.problem.clear();
        return out;
    }
    out.kind = name[pos];
    out.is_head_folder = true;
    if (out.problem.empty() && name != head_folder_name(out.layer, out.head, out.kind))
    {
        out.problem = "not in the dump's format (expected '" + head_folder_name(out.layer, out.head, out.kind)
                      + "': numbers two-digit, zero-padded, without further leading zeros)";
    }
    return out;
}

/// The head folders present in a dump (sorted by layer, then head).
struct dump_scan
{
    std::string data_root;
    std::vector<std::pair<std::size_t, std::size_t>> query;  // (layer, head)
    std::vector<std::pair<std::size_t, std::size_t>> key;

    bool has_query(std::size_t layer, std::size_t head) const
    {
        return std::binary_search(query.begin(), query.end(), std::make_pair(layer, head));
    }
    bool has_key(std::size_t layer, std::size_t head) const
    {
        return std::binary_search(key.begin(), key.end(), std::make_pair(layer, head));
    }
};

/// Lists data_root. Throws input_error(label, ...) for a data_root that cannot be listed and
/// for names of head folders that cannot be used (the first one, sorted, and how many there
/// are); `label` names the folder as the caller knows it ("data_root").
inline dump_scan scan_dump_folder(const std::string& data_root, const std::string& label)
{
    namespace fs = std::filesystem;
    const path_info info = inspect_path(data_root, "folder");
    if (!info.exists)
    {
        throw input_error(label, "'" + data_root + "': " + info.problem);
    }
    if (!info.is_directory)
    {
        throw input_error(label, "'" + data_root + "' is " + info.kind + ", not a folder");
    }
    dump_scan scan;
    scan.data_root = data_root;
    std::vector<std::string> problems;
    std::error_code ec;
    fs::directory_iterator it(data_root, ec);
    const fs::directory_iterator end;
    for (; !ec && it != end; it.increment(ec))
    {
        const std::string name = it->path().filename().string();
        const parsed_folder_name parsed = parse_head_folder_name(name);
        if (!parsed.is_head_folder)
        {
            continue;
        }
        if (!parsed.problem.empty())
        {
            problems.push_back((fs::path(data_root) / name).string() + ": " + parsed.problem);
            continue;
        }
        (parsed.kind == 'q' ? scan.query : scan.key).emplace_back(parsed.layer, parsed.head);
    }
    if (ec)
    {
        const std::string reason = ec == std::errc::permission_denied ? "permission denied" : ec.message();
        throw input_error(label, "cannot list '" + data_root + "': " + reason);
    }
    if (!problems.empty())
    {
        std::sort(problems.begin(), problems.end());
        throw input_error(label, problems.front()
                          + (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more such folders)"
                                                 : std::string()));
    }
    std::sort(scan.query.begin(), scan.query.end());
    std::sort(scan.key.begin(), scan.key.end());
    return scan;
}

/// The three counts of a layout, each known or not.
struct layout_counts
{
    std::optional<std::size_t> num_layers;
    std::optional<std::size_t> num_q_heads;
    std::optional<std::size_t> num_k_heads;
};

namespace detail
{
    /// A JSON syntax error (the reader's position and what was expected there).
    struct json_syntax_error
    {
        std::string what;
    };

    /// Documents after the first, separated by YAML's "---" lines: said as such, since the
    /// metadata was read as YAML before (the same message as then).
    struct json_more_documents
    {
        std::size_t documents = 0;  // up to 1000
    };

    /// One value of metadata.json's top-level object: a scalar (a number, a string's text,
    /// true/false), null, or a nested array or object (skipped: other keys are the capture's own).
    struct json_member
    {
        std::string key;
        enum class kind { scalar, null, nested } type = kind::null;
        std::string text;
    };

    /// A reader of one JSON object of members (RFC 8259), no more: the metadata file needs the
    /// scalars of its top level only, and the io layer reads it without a YAML/JSON library.
    /// Nested values are checked and skipped, to a bounded depth.
    class flat_json_reader
    {
    public:
        explicit flat_json_reader(const std::string& text) : m_text(text)
        {
            if (m_text.compare(0, 3, "\xEF\xBB\xBF") == 0)
            {
                m_pos = 3;  // a UTF-8 byte order mark
            }
        }

        /// The members of the top-level object; nullopt when the text is valid JSON but not an
        /// object (or empty). Throws json_syntax_error.
        std::optional<std::vector<json_member>> members()
        {
            skip_space();
            if (m_pos == m_text.size())
            {
                return std::nullopt;
            }
            if (peek() != '{')
            {
                value(0);
                end_of_text();
                return std::nullopt;
            }
            std::vector<json_member> out;
            ++m_pos;
            skip_space();
            if (peek() == '}')
            {
                ++m_pos;
                end_of_text();
                return out;
            }
            for (;;)
            {
                skip_space();
                if (peek() != '"')
                {
                    fail("expected a key in double quotes");
                }
                json_member member;
                member.key = string_text();
                expect(':');
                skip_space();
                const char c = peek();
                member.type = c == '{' || c == '[' ? json_member::kind::nested
                              : c == 'n'           ? json_member::kind::null
                                                   : json_member::kind::scalar;
                member.text = c == '"' ? string_text() : value(1);
                out.push_back(std::move(member));
                skip_space();
                if (peek() == ',')
                {
                    ++m_pos;
                    continue;
                }
                expect('}');
                end_of_text();
                return out;
            }
        }

    private:
        static constexpr std::size_t max_depth = 64;

        char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }

        [[noreturn]] void fail(const std::string& what) const
        {
            std::size_t line = 1;
            std::size_t column = 1;
            for (std::size_t i = 0; i < m_pos && i < m_text.size(); ++i)
            {
                column = m_text[i] == '\n' ? 1 : column + 1;
                line += m_text[i] == '\n' ? 1 : 0;
            }
            throw json_syntax_error{"line " + std::to_string(line) + ", column " + std::to_string(column) + ": "
                                    + (m_pos >= m_text.size() ? what + " (the text ends)" : what)};
        }

        void skip_space()
        {
            while (m_pos < m_text.size()
                   && (m_text[m_pos] == ' ' || m_text[m_pos] == '\t' || m_text[m_pos] == '\n' || m_text[m_pos] == '\r'))
            {
                ++m_pos;
            }
        }

        void expect(char c)
        {
            skip_space();
            if (peek() != c)
            {
                fail(std::string("expected '") + c + "'");
            }
            ++m_pos;
        }

        void end_of_text()
        {
            skip_space();
            if (m_pos == m_text.size())
            {
                return;
            }
            if (m_text.compare(m_pos, 3, "---") == 0)
            {
                // Each line that starts with "---" begins another document.
                std::size_t documents = 1;
                for (std::size_t line = m_pos; line != std::string::npos && documents < 1000;
                     line = m_text.find('\n', line) == std::string::npos ? std::string::npos : m_text.find('\n', line) + 1)
                {
                    documents += m_text.compare(line, 3, "---") == 0 ? 1 : 0;
                }
                throw json_more_documents{documents};
            }
            fail("unexpected text after the JSON value");
        }

        /// A string's text (escapes decoded; \\u escapes as UTF-8).
        std::string string_text()
        {
            ++m_pos;  // the opening quote
            std::string out;
            for (;;)
            {
                if (m_pos >= m_text.size())
                {
                    fail("unterminated string");
                }
                const char c = m_text[m_pos++];
                if (c == '"')
                {
                    return out;
                }
                if (static_cast<unsigned char>(c) < 0x20)
                {
                    fail("a control character in a string");
                }
                if (c != '\\')
                {
                    out += c;
                    continue;
                }
                const char e = peek();
                ++m_pos;
                const std::string simple = "\"\\/bfnrt";
                const std::string meant = "\"\\/\b\f\n\r\t";
                if (simple.find(e) != std::string::npos && e != '\0')
                {
                    out += meant[simple.find(e)];
                    continue;
                }
                if (e != 'u')
                {
                    --m_pos;
                    fail("an unknown escape in a string");
                }
                unsigned code = hex4();
                if (code >= 0xD800 && code < 0xDC00 && m_text.compare(m_pos, 2, "\\u") == 0)
                {
                    m_pos += 2;
                    const unsigned low = hex4();
                    code = low >= 0xDC00 && low < 0xE000 ? 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00) : 0xFFFD;
                }
                append_utf8(out, code >= 0xD800 && code < 0xE000 ? 0xFFFD : code);
            }
        }

        unsigned hex4()
        {
            unsigned code = 0;
            for (int i = 0; i < 4; ++i, ++m_pos)
            {
                const char h = peek();
                const int digit = h >= '0' && h <= '9'   ? h - '0'
                                  : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                  : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                         : -1;
                if (digit < 0)
                {
                    fail("expected four hexadecimal digits after \\u");
                }
                code = code * 16 + static_cast<unsigned>(digit);
            }
            return code;
        }

        static void append_utf8(std::string& out, unsigned code)
        {
            if (code < 0x80)
            {
                out += static_cast<char>(code);
            }
            else if (code < 0x800)
            {
                out += static_cast<char>(0xC0 | (code >> 6));
                out += static_cast<char>(0x80 | (code & 0x3F));
            }
            else if (code < 0x10000)
            {
                out += static_cast<char>(0xE0 | (code >> 12));
                out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
                out += static_cast<char>(0x80 | (code & 0x3F));
            }
            else
            {
                out += static_cast<char>(0xF0 | (code >> 18));
                out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
                out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
                out += static_cast<char>(0x80 | (code & 0x3F));
            }
        }

        /// Any value at `depth`; returns the text of a number or literal ("" for the others).
        std::string value(std::size_t depth)
        {
            skip_space();
            if (depth > max_depth)
            {
                fail("values nested deeper than " + std::to_string(max_depth) + " levels");
            }
            const char c = peek();
            if (c == '"')
            {
                string_text();
                return "";
            }
            if (c == '{' || c == '[')
            {
                const char close = c == '{' ? '}' : ']';
                ++m_pos;
                skip_space();
                if (peek() == close)
                {
                    ++m_pos;
                    return "";
                }
                for (;;)
                {
                    if (c == '{')
                    {
                        skip_space();
                        if (peek() != '"')
                        {
                            fail("expected a key in double quotes");
                        }
                        string_text();
                        expect(':');
                    }
                    value(depth + 1);
                    skip_space();
                    if (peek() != ',')
                    {
                        expect(close);
                        return "";
                    }
                    ++m_pos;
                }
            }
            for (const char* literal : {"true", "false", "null"})
            {
                if (m_text.compare(m_pos, std::char_traits<char>::length(literal), literal) == 0)
                {
                    m_pos += std::char_traits<char>::length(literal);
                    return literal;
                }
            }
            return number_text();
        }

        /// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
        std::string number_text()
        {
            const std::size_t start = m_pos;
            auto digits = [&] {
                const std::size_t from = m_pos;
                while (peek() >= '0' && peek() <= '9')
                {
                    ++m_pos;
                }
                return m_pos - from;
            };
            if (peek() == '-')
            {
                ++m_pos;
            }
            const std::size_t integer_start = m_pos;
            const std::size_t integer_digits = digits();
            if (integer_digits == 0 || (integer_digits > 1 && m_text[integer_start] == '0'))
            {
                m_pos = start;
                fail("expected a value (a number, a string, true, false, null, an array or an object)");
            }
            if (peek() == '.')
            {
                ++m_pos;
                if (digits() == 0)
                {
                    fail("expected digits after the decimal point");
                }
            }
            if (peek() == 'e' || peek() == 'E')
            {
                ++m_pos;
                if (peek() == '+' || peek() == '-')
                {
                    ++m_pos;
                }
                if (digits() == 0)
                {
                    fail("expected the digits of an exponent");
                }
            }
            return m_text.substr(start, m_pos - start);
        }

        const std::string& m_text;
        std::size_t m_pos = 0;
    };

    /// A layout count of metadata.json, 1 to max_layout_count: the reason it is not one, or "".
    inline std::string layout_count_problem(const std::string& raw, std::size_t& value)
    {
        const auto first = raw.find_first_not_of(" \t\r\n");
        const std::string text =
            first == std::string::npos ? "" : raw.substr(first, raw.find_last_not_of(" \t\r\n") - first + 1);
        if (text.empty())
        {
            return "missing value (expected an integer)";
        }
        if (text.find_first_not_of("0123456789") != std::string::npos)
        {
            return "'" + raw + "' is not a non-negative integer";
        }
        // As strtoull reads it: more than 64 bits is out of range, any other number a count or not.
        const std::string digits = text.substr(std::min(text.find_first_not_of('0'), text.size()));
        const std::string max_u64 = "18446744073709551615";
        if (digits.size() > max_u64.size() || (digits.size() == max_u64.size() && digits > max_u64))
        {
            return "'" + raw + "' is out of range";
        }
        const std::uint64_t number = digits.size() > 5 ? max_layout_count + 1 : digits.empty() ? 0 : std::stoull(digits);
        if (number < 1 || number > max_layout_count)
        {
            return text + " must be >= 1 and <= " + std::to_string(max_layout_count);
        }
        value = static_cast<std::size_t>(number);
        return "";
    }
}  // namespace detail

/// The layout counts of a metadata text: a JSON object with any of num_layers, num_q_heads and
/// num_k_heads (other keys are the capture's own and are ignored). input_error(path, reason)
/// when it is not valid JSON, not an object, gives a key twice or a count that is not 1 to
/// max_layout_count.
inline layout_counts parse_dump_metadata(const std::string& text, const std::string& path)
{
    if (text.find('\0') != std::string::npos)
    {
        throw input_error(path, "not valid JSON: it holds a NUL byte");
    }
    std::optional<std::vector<detail::json_member>> members;
    try
    {
        members = detail::flat_json_reader(text).members();
    }
    catch (const detail::json_syntax_error& e)
    {
        throw input_error(path, "not valid JSON: " + e.what);
    }
    catch (const detail::json_more_documents& e)
    {
        throw input_error(path, "holds " + std::to_string(e.documents) + (e.documents == 1000 ? " or more" : "")
                                    + " YAML documents (separated by '---'); give one");
    }
    if (!members)
    {
        throw input_error(path, "expected a JSON object ({\"num_layers\": ..., ...})");
    }
    std::set<std::string> keys;
    for (const detail::json_member& member : *members)
    {
        // A key given twice would silently take one of its values.
        if (!keys.insert(member.key).second)
        {
            throw input_error(path, "key '" + member.key + "' is given twice; keep one value");
        }
    }
    layout_counts counts;
    const std::pair<const char*, std::optional<std::size_t>*> fields[] = {
        {"num_layers", &counts.num_layers}, {"num_q_heads", &counts.num_q_heads}, {"num_k_heads", &counts.num_k_heads}};
    for (const auto& [key, field] : fields)
    {
        const auto member = std::find_if(members->begin(), members->end(),
                                         [key = key](const detail::json_member& m) { return m.key == key; });
        if (member == members->end() || member->type == detail::json_member::kind::null)
        {
            continue;
        }
        if (member->type == detail::json_member::kind::nested)
        {
            throw input_error(path, std::string(key) + ": expected a number");
        }
        std::size_t value = 0;
        const std::string problem = detail::layout_count_problem(member->text, value);
        if (!problem.empty())
        {
            throw input_error(path, std::string(key) + ": " + problem);
        }
        *field = value;
    }
    return counts;
}

/// The layout counts of <data_root>/metadata.json (none when there is no such file);
/// input_error(path, reason) when it cannot be read or parsed.
inline layout_counts read_dump_metadata(const std::string& data_root)
{
    const std::string path = (std::filesystem::path(data_root) / dump_metadata_file).string();
    if (inspect_path(path).absent)
    {
        return {};
    }
    return parse_dump_metadata(read_config_text(path), path);
}
}  // namespace attention_plasticity::io

#endif
