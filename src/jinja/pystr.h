// Python's str operations over UTF-8 bytes, for the Jinja engine (jinja/value.h):
// what chat templates call on message text ('...'.strip(), .split(), |trim, |title,
// slicing by character, repr() quoting). Python indexes strings by code point, so
// these do too; a byte that is not valid UTF-8 counts as one character and is kept
// as it is. Case mapping is Unicode's (text/case_map.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

// Python's str.isspace() for one code point (what str.split() and str.strip() use).
bool is_py_space(uint32_t cp);

// The characters of s, each as its bytes.
std::vector<std::string_view> split_chars(std::string_view s);
size_t char_count(std::string_view s);

// str.strip / lstrip / rstrip; `chars` absent strips whitespace.
std::string_view py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                          bool right);

// str.split / str.rsplit; `sep` absent splits on runs of whitespace. maxsplit < 0: all.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()
std::string py_swapcase(std::string_view s);
bool py_islower(std::string_view s);
bool py_isupper(std::string_view s);

// str.replace(old, new, count); count < 0 replaces all.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);
// str.find / rfind / count, with code point indices.
int64_t py_find(std::string_view s, std::string_view sub, bool reverse);
int64_t py_count(std::string_view s, std::string_view sub);

// repr() of a str: quoted with ' (or " when the text holds ' but no "), with \n, \t,
// \\, the quote and non-printable characters escaped.
std::string repr_string(std::string_view s);

}  // namespace pagoda::jinja
