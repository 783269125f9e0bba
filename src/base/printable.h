// Text from a file or a request, made safe to print: in error messages and `inspect`
// output a model file's strings must not be able to move the cursor, retitle the terminal
// or fill a screen. Printable UTF-8 is kept as it is (CJK and emoji tokens stay readable);
// control characters, invalid bytes and bidirectional overrides become escapes, and long
// text is cut with its full length noted. Pure functions: cost linear in the bytes shown,
// thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda {

// `s` with \n, \t, \r, \\ and \xNN escapes for control characters, bytes that are not
// valid UTF-8 and the code points that reorder or hide text (U+200B..U+200F,
// U+202A..U+202E, U+2066..U+2069), cut after `max_bytes` of input with
// "... (N bytes)" appended.
std::string printable(std::string_view s, size_t max_bytes = 96);

// printable(s) between single quotes, for naming a value in a message.
std::string in_quotes(std::string_view s, size_t max_bytes = 96);

}  // namespace pagoda
