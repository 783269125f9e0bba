// The Jinja renderer on arbitrary template source: parse, then render with a chat's
// variables. Parse and render errors are expected; the renderer's limits (loop
// iterations, call depth, output size, value walks) must stop hostile templates.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::ChatTemplateOptions options;
  // Tighter than a server's limits so that one input stays in milliseconds.
  options.limits.max_iterations = 20'000;
  options.limits.work_budget = 2'000'000;
  auto t = pagoda::ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size), options);
  if (!t) return 0;
  const std::vector<pagoda::ChatMessage> messages = {
      {"system", "You are terse."}, {"user", "Hi {{ 7*7 }} \xe4\xb8\x96"}, {"assistant", "Hello."}, {"user", "Bye"}};
  (void)t->render(messages, true, "<s>", "</s>");
  return 0;
}
