#include "chat/tool_call_scanner.h"

#include <nlohmann/json.hpp>

namespace pagoda {

std::vector<ScannedCall> scan_tool_calls(std::string_view s) {
  std::vector<ScannedCall> calls;
  std::vector<char> stack;  // '{' and '[' open around the current position
  size_t call_depth = 0;    // stack size inside the current call object; 0: none
  // Inside the call object, at its own level: the member being read.
  enum class Want { kKey, kColon, kValue, kComma } want = Want::kComma;
  std::string key;
  size_t i = 0;
  auto read_string = [&](size_t start, size_t& end) {
    // s[start] is '"'; end: one past the closing quote, npos when not yet complete.
    for (size_t j = start + 1; j < s.size(); ++j) {
      if (s[j] == '\\') {
        ++j;
        continue;
      }
      if (s[j] == '"') {
        end = j + 1;
        return;
      }
    }
    end = std::string_view::npos;
  };
  while (i < s.size()) {
    const char c = s[i];
    const bool at_call_level = call_depth != 0 && stack.size() == call_depth;
    if (c == '"') {
      size_t end = 0;
      read_string(i, end);
      if (end == std::string_view::npos) break;  // the rest is an unfinished string
      if (at_call_level && want == Want::kKey) {
        const nlohmann::json k = nlohmann::json::parse(s.substr(i, end - i), nullptr, false);
        key = k.is_string() ? k.get<std::string>() : std::string();
        want = Want::kColon;
      } else if (at_call_level && want == Want::kValue) {
        if (key == "name") {
          const nlohmann::json v = nlohmann::json::parse(s.substr(i, end - i), nullptr, false);
          if (v.is_string()) calls.back().name = v.get<std::string>();
        }
        want = Want::kComma;
      }
      i = end;
      continue;
    }
    if (c == '{' || c == '[') {
      if (at_call_level && want == Want::kValue) {
        if (c == '{' && (key == "arguments" || key == "parameters") && calls.back().args_begin == std::string::npos)
          calls.back().args_begin = i;
        want = Want::kComma;
      }
      stack.push_back(c);
      if (c == '{' && call_depth == 0 && (stack.size() == 1 || (stack.size() == 2 && stack[0] == '['))) {
        calls.emplace_back();
        call_depth = stack.size();
        want = Want::kKey;
      }
    } else if (c == '}' || c == ']') {
      if (stack.empty()) {
        ++i;
        continue;
      }
      stack.pop_back();
      if (call_depth != 0) {
        if (stack.size() + 1 == call_depth) {
          call_depth = 0;  // the call object closed
        } else if (stack.size() == call_depth) {
          ScannedCall& cur = calls.back();
          if (cur.args_begin != std::string::npos && cur.args_end == std::string::npos && c == '}') {
            // The value that just closed is the arguments object when it started at args_begin.
            cur.args_end = i + 1;
          }
        }
      }
    } else if (at_call_level) {
      if (c == ':' && want == Want::kColon) want = Want::kValue;
      else if (c == ',' && want == Want::kComma) want = Want::kKey;
      else if (want == Want::kValue && c != ' ' && c != '\n' && c != '\t' && c != '\r') want = Want::kComma;  // a number, true, ...
    }
    ++i;
  }
  return calls;
}

}  // namespace pagoda
