#ifndef ATTENTION_PLASTICITY_IO_JSON_HPP
#define ATTENTION_PLASTICITY_IO_JSON_HPP

// JSON, the project's one home for it (docs/method.md §1.1, §3.1, §8.4): every JSON text read
// (a dump's metadata.json, a model's config.json, a shard's shard.json) is parsed here, on
// nlohmann/json, and every JSON text written (shard.json, run.json, a synthetic dump's
// metadata.json) quotes its strings with json_string() here.
//
// Reading is strict, as hostile input demands (tests/run/test_json.cpp):
//   - the text is bounded (json_limits::max_bytes) and holds no NUL byte;
//   - RFC 8259 only: no NaN or Infinity, no comments, no trailing text; a number whose value is
//     not a finite double (1e400) is refused;
//   - nesting is bounded (json_limits::max_depth): a deep text is refused, never a stack overflow
//     (nlohmann's parser is not recursive);
//   - a key given twice in one object is refused (nlohmann would keep the last silently);
//   - documents after the first, separated by YAML's "---" lines, are said as such (the readers
//     read these files as YAML before: the same message as then);
//   - a UTF-8 byte order mark is skipped; a text of white space only reads as null (as YAML read
//     it: the readers then say that they expected an object).
// Objects keep their keys in the order of the text (ordered_json). Errors are
// input_error(file, reason), the reason starting "not valid JSON: line L, column C: " where the
// parser gives a place.

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "errors.hpp"

namespace attention_plasticity::io
{
/// A JSON value as read: objects keep the order of their keys.
using json = nlohmann::ordered_json;

/// The bounds of a JSON text read.
struct json_limits
{
    std::size_t max_bytes = std::size_t{64} << 20;
    /// Values nested deeper than this are refused; the top-level value is level 0.
    std::size_t max_depth = 64;
};

/// A JSON text as read: its value, and the text of each floating-point number as written (by
/// JSON pointer, "/num_layers"), since a double does not keep it ("99999999999999999999" is read
/// as 1e20; a message quotes what the file says).
struct json_document
{
    json value;
    std::map<std::string, std::string> float_texts;

    /// The text of the number at `pointer` as written (floats), or as printed (integers).
    std::string number_text(const std::string& pointer, const json& number) const
    {
        const auto it = float_texts.find(pointer);
        return it != float_texts.end() ? it->second : number.dump();
    }
};

namespace detail
{
    /// Builds the value of a JSON text from nlohmann's SAX events (as its json_sax_dom_parser
    /// does), refusing repeated keys and nesting beyond the bound; the first problem is kept.
    class strict_json_builder
    {
    public:
        using number_integer_t = json::number_integer_t;
        using number_unsigned_t = json::number_unsigned_t;
        using number_float_t = json::number_float_t;
        using string_t = json::string_t;
        using binary_t = json::binary_t;

        strict_json_builder(json_document& doc, std::size_t max_depth) : m_doc(doc), m_max_depth(max_depth) {}

        std::string problem;      // the reason, when a callback refused
        bool too_deep = false;    // the problem is nesting (its place is found afterwards)
        std::string parse_message;  // nlohmann's message, when the text is not JSON

        bool null() { return add(json(nullptr)); }
        bool boolean(bool v) { return add(json(v)); }
        bool number_integer(number_integer_t v) { return add(json(v)); }
        bool number_unsigned(number_unsigned_t v) { return add(json(v)); }
        bool number_float(number_float_t v, const string_t& text)
        {
            if (!std::isfinite(v))
            {
                problem = "the number " + text + " is not a finite double";
                return false;
            }
            m_doc.float_texts[pointer_of_next()] = text;
            return add(json(v));
        }
        bool string(string_t& v) { return add(json(std::move(v))); }
        bool binary(binary_t&) { return false; }  // never in JSON text
        bool start_object(std::size_t) { return open(json::object()); }
        bool key(string_t& k)
        {
            frame& f = m_stack.back();
            if (!f.keys.insert(k).second)
            {
                problem = "key '" + dotted_path(k) + "' is given twice; keep one value";
                return false;
            }
            f.key = k;
            return true;
        }
        bool end_object() { return close(); }
        bool start_array(std::size_t) { return open(json::array()); }
        bool end_array() { return close(); }
        bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e)
        {
            parse_message = e.what();
            return false;
        }

    private:
        struct frame
        {
            json* value = nullptr;
            std::set<std::string> keys;
            std::string key;  // the key of the member being read (objects)
        };

        /// Where the next value goes: "/a/0/b" (JSON pointer, RFC 6901).
        std::string pointer_of_next() const
        {
            std::string out;
            for (const frame& f : m_stack)
            {
                std::string token = f.value->is_object() ? f.key : std::to_string(f.value->size());
                std::string escaped;
                for (const char c : token)
                {
                    escaped += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
                }
                out += "/" + escaped;
            }
            return out;
        }

        /// "text_config.n_head", "a[2].b": the path of key `k` of the innermost object.
        std::string dotted_path(const std::string& k) const
        {
            std::string out;
            for (std::size_t i = 0; i + 1 < m_stack.size(); ++i)
            {
                const frame& f = m_stack[i];
                if (f.value->is_object())
                {
                    out += (out.empty() ? "" : ".") + f.key;
                }
                else
                {
                    out += "[" + std::to_string(f.value->size() - 1) + "]";  // the open one, placed last
                }
            }
            return out + (out.empty() ? "" : ".") + k;
        }

        bool add(json v)
        {
            place(std::move(v));
            return true;
        }

        json* place(json v)
        {
            if (m_stack.empty())
            {
                m_doc.value = std::move(v);
                return &m_doc.value;
            }
            frame& f = m_stack.back();
            if (f.value->is_array())
            {
                f.value->push_back(std::move(v));
                return &f.value->back();
            }
            json& slot = (*f.value)[f.key];
            slot = std::move(v);
            return &slot;
        }

        bool open(json empty)
        {
            if (m_stack.size() + 1 > m_max_depth + 1)
            {
                too_deep = true;
                problem = "values nested deeper than " + std::to_string(m_max_depth) + " levels";
                return false;
            }
            json* v = place(std::move(empty));
            m_stack.push_back(frame{v, {}, {}});
            return true;
        }

        bool close()
        {
            m_stack.pop_back();
            return true;
        }

        json_document& m_doc;
        std::size_t m_max_depth;
        std::vector<frame> m_stack;
    };

    /// "line L, column C" of byte `pos` of `text` (both from 1).
    inline std::string json_place(const std::string& text, std::size_t pos)
    {
        std::size_t line = 1;
        std::size_t column = 1;
        for (std::size_t i = 0; i < pos && i < text.size(); ++i)
        {
            column = text[i] == '\n' ? 1 : column + 1;
            line += text[i] == '\n' ? 1 : 0;
        }
        return "line " + std::to_string(line) + ", column " + std::to_string(column);
    }

    /// The byte of the first '[' or '{' opened at nesting level `level` (the top-level value is
    /// level 0), outside strings; the text before it is known to be valid JSON (the parser
    /// reached it), so brackets and quotes are all there is to count.
    inline std::size_t json_opening_at_level(const std::string& text, std::size_t level)
    {
        std::size_t open = 0;
        bool in_string = false;
        for (std::size_t i = 0; i < text.size(); ++i)
        {
            const char c = text[i];
            if (in_string)
            {
                i += c == '\\' ? 1 : 0;
                in_string = c != '"';
            }
            else if (c == '"')
            {
                in_string = true;
            }
            else if (c == '[' || c == '{')
            {
                if (open++ == level)
                {
                    return i;
                }
            }
            else if (c == ']' || c == '}')
            {
                --open;
            }
        }
        return text.size();
    }

    /// Parses without the "---" check; false and the reason when the text is not accepted.
    inline bool parse_json_text(const std::string& text, std::size_t max_depth, json_document& doc,
                                std::string& reason)
    {
        strict_json_builder builder(doc, max_depth);
        if (json::sax_parse(text, &builder, json::input_format_t::json, true, false))
        {
            return true;
        }
        if (!builder.parse_message.empty())
        {
            // "[json.exception.parse_error.101] parse error at line 1, column 17: syntax error ...",
            // "[json.exception.out_of_range.406] number overflow parsing '1e400'": the words after.
            std::string what = builder.parse_message;
            if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos)
            {
                what = what.substr(what.find("] ") + 2);
            }
            const std::string at = "parse error at ";
            reason = "not valid JSON: " + (what.rfind(at, 0) == 0 ? what.substr(at.size()) : what);
        }
        else if (builder.too_deep)
        {
            reason = "not valid JSON: " + json_place(text, json_opening_at_level(text, max_depth + 1)) + ": "
                     + builder.problem;
        }
        else if (builder.problem.rfind("key '", 0) == 0)
        {
            reason = builder.problem;
        }
        else
        {
            reason = "not valid JSON: " + builder.problem;
        }
        return false;
    }
}  // namespace detail

/// Parses the JSON text `text` of `file` (which names it in messages), strictly (see above).
/// Throws input_error(file, reason).
inline json_document parse_json(const std::string& text, const std::string& file, const json_limits& limits = {})
{
    if (text.size() > limits.max_bytes)
    {
        throw input_error(file, std::to_string(text.size()) + " bytes; a JSON text read may have at most "
                                    + std::to_string(limits.max_bytes));
    }
    if (text.find('\0') != std::string::npos)
    {
        throw input_error(file, "not valid JSON: it holds a NUL byte");
    }
    json_document doc;
    if (text.find_first_not_of(" \t\r\n", text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0) == std::string::npos)
    {
        return doc;  // white space only: null, as the YAML readers read it
    }
    std::string reason;
    if (detail::parse_json_text(text, limits.max_depth, doc, reason))
    {
        return doc;
    }
    // Documents after the first, each after a line that starts with "---" (YAML's separator).
    std::vector<std::size_t> separators;
    for (std::size_t line = 0; line < text.size() && separators.size() < 999;)
    {
        if (text.compare(line, 3, "---") == 0)
        {
            separators.push_back(line);
        }
        const std::size_t end = text.find('\n', line);
        if (end == std::string::npos)
        {
            break;
        }
        line = end + 1;
    }
    json_document first;
    std::string ignored;
    if (!separators.empty() && detail::parse_json_text(text.substr(0, separators.front()), limits.max_depth, first, ignored))
    {
        const std::size_t documents = separators.size() + 1;
        throw input_error(file, "holds " + std::to_string(documents) + (documents == 1000 ? " or more" : "")
                                    + " YAML documents (separated by '---'); give one");
    }
    throw input_error(file, reason);
}

/// The text of a scalar as a YAML reader saw it (the readers' messages quote it): a string's
/// text, a number as written, true or false; "" for null, arrays and objects.
inline std::string json_scalar_text(const json& value)
{
    if (value.is_string())
    {
        return value.get<std::string>();
    }
    if (value.is_number() || value.is_boolean())
    {
        return value.dump();
    }
    return "";
}

namespace detail
{
    /// The length of the valid UTF-8 sequence at s[i] (2 to 4 bytes, a code point that YAML can
    /// print: no surrogates, no C1 controls, not overlong), 0 when there is none.
    inline std::size_t utf8_sequence(const std::string& s, std::size_t i)
    {
        auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
        const unsigned char c = byte(i);
        std::size_t n = 0;
        unsigned code = 0;
        if (c >= 0xC2 && c <= 0xDF)
        {
            n = 2, code = c & 0x1Fu;
        }
        else if (c >= 0xE0 && c <= 0xEF)
        {
            n = 3, code = c & 0x0Fu;
        }
        else if (c >= 0xF0 && c <= 0xF4)
        {
            n = 4, code = c & 0x07u;
        }
        else
        {
            return 0;
        }
        if (i + n > s.size())
        {
            return 0;
        }
        for (std::size_t k = 1; k < n; ++k)
        {
            if ((byte(i + k) & 0xC0u) != 0x80u)
            {
                return 0;
            }
            code = (code << 6) | (byte(i + k) & 0x3Fu);
        }
        const bool overlong = (n == 3 && code < 0x800) || (n == 4 && code < 0x10000);
        if (overlong || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF) || (code >= 0x80 && code <= 0x9F))
        {
            return 0;  // C1 controls are not printable in YAML: escaped as invalid
        }
        return n;
    }
}  // namespace detail

/// A JSON string literal of `s`: '"' and '\' escaped, control characters (and DEL) as \u00XX,
/// valid UTF-8 kept, any other byte replaced by U+FFFD (messages may quote file names that are
/// not UTF-8). The writers' one quoting: their texts stay byte for byte what they were.
inline std::string json_string(const std::string& s)
{
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size();)
    {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\')
        {
            out += '\\';
            out += static_cast<char>(c);
            ++i;
        }
        else if (c < 0x20 || c == 0x7F)
        {
            char escape[8];
            std::snprintf(escape, sizeof(escape), "\\u%04x", c);
            out += escape;
            ++i;
        }
        else if (c < 0x80)
        {
            out += static_cast<char>(c);
            ++i;
        }
        else if (const std::size_t n = detail::utf8_sequence(s, i); n > 0)
        {
            out.append(s, i, n);
            i += n;
        }
        else
        {
            out += "\xef\xbf\xbd";  // U+FFFD as UTF-8: what reads back is written back the same
            ++i;
        }
    }
    return out + "\"";
}
}  // namespace attention_plasticity::io

#endif
