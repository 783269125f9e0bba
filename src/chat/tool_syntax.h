// Tool calling in a model's own syntax: how a family writes a call in its reply
// (Hermes/Qwen `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, Llama 3.x's bare
// `{"name": ..., "parameters": ...}`, Mistral's `[TOOL_CALLS][{...}, ...]`), how to recognise the family from its chat template,
// how to read the calls back out of generated text, and the xgrammar structural tag that
// makes tool_choice binding: `required` and a named function constrain the whole reply to
// calls whose arguments match the tool's parameters schema, `auto` lets text through
// until the call opener and then constrains the call, `none` forbids the opener.
//
// One syntax is one ToolSyntax in its own file (tool_syntax_<name>.cpp) plus a line in
// the table of tool_syntax.cpp. Everything here is pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace pagoda {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ToolDef {
  std::string name;
  std::string parameters;  // the parameters' JSON schema (text); empty: none (arguments are {})
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ToolSyntax {
  const char* name;  // as --tool-call-parser names it: "hermes", "llama3_json"
  // Whether a chat template writes this syntax.
  bool (*detect)(std::string_view template_source);
  // Texts that open the calls in a reply; what comes before the first is content.
  std::vector<std::string> openers;
  // The opener counts only at the start of the reply (after whitespace).
  bool opener_at_start = false;
  // The calls in `region` (from the opener to the end of the reply), or nullopt when
  // it does not parse as calls (the reply is then all content, as vLLM does).
  std::optional<std::vector<ToolCall>> (*parse)(std::string_view region);
  // The JSON of one call's prefix and suffix around the arguments object, for the
  // structural tag: prefix(name) + arguments + suffix.
  std::string (*call_prefix)(const std::string& name);
  std::string call_suffix;
  std::string separator;  // between parallel calls
  // Around all the calls of a reply (Mistral's JSON array); empty for most.
  std::string calls_begin, calls_end;
  // Call ids: 0 "call_" and 20 hex digits, else this many letters and digits (Mistral's
  // templates accept only 9). A call the model wrote with a valid id keeps it.
  int id_length = 0;
};

// The syntax a template writes, or nullptr when it renders no tools (or none known).
const ToolSyntax* detect_tool_syntax(std::string_view template_source);
// By name; nullptr when unknown.
const ToolSyntax* find_tool_syntax(std::string_view name);
// The names, for --tool-call-parser's help and errors.
std::vector<std::string> tool_syntax_names();

// The structural tag (xgrammar's JSON) that enforces `choice` over `tools`; `named` is the
// function for ToolChoice::kNamed. Each tool's parameters are checked as response_format
// schemas are; an unsupported keyword is an error naming tools[i].
Result<std::string> tool_call_structural_tag(const ToolSyntax& syntax, const std::vector<ToolDef>& tools,
                                             ToolChoice choice, const std::string& named, bool parallel);

// Splits generated text as it arrives: content is released as soon as it cannot be
// the start of a call opener; from an opener on, the text is held until finish() parses
// it. Feeding a reply in any pieces gives the same result as feeding it whole.
class ToolCallExtractor {
 public:
  explicit ToolCallExtractor(const ToolSyntax* syntax) : syntax_(syntax) {}
  // Content that may be shown now.
  std::string feed(std::string_view text);
  struct Final {
    std::string content;          // the rest of the content
    std::vector<ToolCall> calls;  // empty when the reply held no (parseable) call
  };
  Final finish();
  const ToolSyntax* syntax() const { return syntax_; }

  // Streaming the calls as they are written (call after each feed(), and once more before
  // finish()): a call's first piece carries its name, the later ones the next bytes of
  // its arguments object, so the pieces of a call join to its arguments. Only for calls
  // a grammar keeps well-formed: a piece sent cannot be taken back if the reply then fails
  // to parse. A call whose arguments are not an object as written (a JSON string) gets
  // them at the end.
  struct Piece {
    size_t index = 0;
    bool first = false;  // name set; arguments empty or its first bytes
    std::string name;
    std::string arguments;
  };
  std::vector<Piece> pieces();
  // Calls that have had a first piece, and whether call k's arguments were streamed.
  size_t streamed_calls() const { return sent_.size(); }
  bool arguments_streamed(size_t k) const { return k < sent_.size() && sent_[k] > 0; }

 private:
  const ToolSyntax* syntax_;
  std::string pending_;  // content held back: it could be the start of an opener
  std::string region_;   // from the opener on
  bool in_calls_ = false;
  bool seen_text_ = false;  // content other than whitespace was released
  std::vector<size_t> sent_;  // per call started: region_ bytes of its arguments sent up to (0: none)
};

}  // namespace pagoda
