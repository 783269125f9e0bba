// Where the calls are in a reply's call region while it is still being generated: each
// call object's name (once its string is complete) and the byte range of its arguments
// object (open until its closing brace arrives), whatever the syntax around the objects
// (Hermes' tags, Llama 3's `;`, Mistral's array). What lets the server stream a call's
// arguments as they are written instead of at the end of the reply.
//
// A call object is a JSON object at the top level of the region or inside a top-level
// array; its "name" and its "arguments" (or "parameters") members are read. Arguments
// given as a JSON string (some models quote them) have no range: they are sent whole at
// the end.
//
// Cost: a pass over the region per scan (replies are kilobytes). Thread-safety: pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

struct ScannedCall {
  std::string name;          // empty until its string is complete
  size_t args_begin = std::string::npos;  // the arguments object's '{'
  size_t args_end = std::string::npos;    // one past its '}'; npos while open
};

std::vector<ScannedCall> scan_tool_calls(std::string_view region);

}  // namespace pagoda
