// pagoda-chat-template-tool: renders a Jinja chat template with the variables of a
// JSON file, for the jinja2 oracle test (test_chat_template_vs_jinja2.py) and for
// trying a model's template by hand.
//
//   pagoda-chat-template-tool TEMPLATE.jinja CONTEXT.json [options]
//
// CONTEXT.json holds one object; its keys become the template's variables (messages,
// add_generation_prompt, bos_token, ...), in their order. The rendered text goes to
// stdout as it is (no newline added); an error goes to stderr with exit code 1.
//
// Options (the defaults are transformers'):
//   --no-trim-blocks  --no-lstrip-blocks  --keep-trailing-newline
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jinja_json_context.h"
#include "chat/chat_template.h"

namespace {

bool read_file(const char* path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

int usage(const std::string& msg) {
  fmt::print(stderr,
             "pagoda-chat-template-tool: {}\nusage: pagoda-chat-template-tool TEMPLATE.jinja "
             "CONTEXT.json [--no-trim-blocks] [--no-lstrip-blocks] [--keep-trailing-newline]\n",
             msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  pagoda::ChatTemplateOptions options;
  const char* paths[2] = {nullptr, nullptr};
  int n_paths = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-trim-blocks") {
      options.trim_blocks = false;
    } else if (arg == "--no-lstrip-blocks") {
      options.lstrip_blocks = false;
    } else if (arg == "--keep-trailing-newline") {
      options.keep_trailing_newline = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage("unknown option " + arg);
    } else if (n_paths < 2) {
      paths[n_paths++] = argv[i];
    } else {
      return usage("too many arguments");
    }
  }
  if (n_paths != 2) return usage("expected a template file and a context file");

  std::string source, context_text;
  if (!read_file(paths[0], source)) return usage(std::string("cannot read ") + paths[0]);
  if (!read_file(paths[1], context_text)) return usage(std::string("cannot read ") + paths[1]);
  nlohmann::ordered_json context_json =
      nlohmann::ordered_json::parse(context_text, nullptr, /*allow_exceptions=*/false);
  if (context_json.is_discarded() || !context_json.is_object())
    return usage(std::string(paths[1]) + " does not hold a JSON object");

  pagoda::Result<std::string> out =
      pagoda::render_template(source, pagoda::jinja_from_json(context_json), options);
  if (!out) {
    fmt::print(stderr, "error: {}\n", out.status().message());
    return 1;
  }
  fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}
