// Python's two string formatting mini-languages for the Jinja engine: `fmt % args`
// (printf style, also the |format filter) and `fmt.format(*args, **kwargs)`. The
// common conversions are covered (s r d i f e g x o c %, fill, alignment, sign,
// width, precision, zero padding); anything else fails with a clear message rather
// than printing something Python would not.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace pagoda::jinja {

// `fmt % args`: a tuple supplies several arguments, a dict named ones (%(name)s),
// anything else is the single argument.
std::string percent_format(std::string_view fmt, const Value& args);

// `fmt.format(*args, **kwargs)`.
std::string brace_format(std::string_view fmt, const CallArgs& args);

}  // namespace pagoda::jinja
