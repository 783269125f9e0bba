// `pagoda chat -m MODEL`: an interactive terminal chat. Each line you type is a user turn;
// the conversation so far goes through the model's chat template (the same renderer as
// the server) and the reply streams as it is generated. Ctrl-C stops a reply early (a
// second Ctrl-C, or one at the prompt, leaves); Ctrl-D leaves. "/clear" starts over.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include "base/thread_pool.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "engine/generator.h"
#include "chat/chat_prompt.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;

struct ChatArgs {
  std::string model;
  std::string system;
  std::string chat_template_file;
  int32_t n_predict = -1;
  std::vector<std::string> stop;
  int32_t ctx = 4096;
  int32_t threads = 0;
  SamplingParams sp;
  int64_t seed = -1;
  EngineArgs engine;
};

std::atomic<int> g_interrupts{0};
extern "C" void on_sigint(int) { g_interrupts.fetch_add(1); }

int run_chat(const ChatArgs& a) {
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/true);
  if (!loaded) return fail(loaded.status());
  Model& model = *loaded->model;
  std::unique_ptr<Tokenizer>& tokenizer = loaded->tokenizer;
  auto tpl_r = chat_template_source(*loaded->file, a.chat_template_file);
  if (!tpl_r) return fail(tpl_r.status());
  const std::string& tpl = *tpl_r;
  auto prompter = ChatPrompter::create(tpl, model.config().arch_name, *tokenizer);
  if (!prompter) return fail(prompter.status());
  const int32_t ctx = a.ctx > 0 ? std::min(a.ctx, model.config().n_ctx_train) : model.config().n_ctx_train;
  EngineArgs ea = a.engine;
  ea.max_num_seqs = 1;
  auto ec = engine_config(ea, ctx);
  if (!ec) return fail(ec.status());
  auto draft = load_draft_model(ec->speculative, *loaded);
  if (!draft) return fail(draft.status());
  auto engine = Engine::create(model, tokenizer.get(), *ec, draft->model.get());
  if (!engine) return fail(engine.status());

  std::signal(SIGINT, on_sigint);
  const bool tty = isatty(STDIN_FILENO) != 0;
  fmt::print(stderr, "pagoda chat: {} | context {} | template: {} | Ctrl-D or Ctrl-C to leave, /clear to start over\n",
             a.model, ctx, tpl.empty() ? (*prompter)->origin() : "model");
  std::vector<ChatMessage> messages;
  if (!a.system.empty()) messages.push_back({"system", a.system});
  GenerateOptions opts;
  opts.max_tokens = a.n_predict;
  opts.stop = a.stop;
  opts.sampling = a.sp;
  opts.sampling.seed = a.seed < 0 ? kRandomSeed : static_cast<uint64_t>(a.seed);
  std::string line;
  for (;;) {
    if (tty) fmt::print("\n> ");
    std::fflush(stdout);
    g_interrupts.store(0);
    if (!std::getline(std::cin, line)) break;  // Ctrl-D
    if (g_interrupts.load() > 0) break;
    if (line.empty()) continue;
    if (line == "/clear") {
      messages.resize(a.system.empty() ? 0 : 1);
      fmt::print(stderr, "(conversation cleared)\n");
      continue;
    }
    messages.push_back({"user", line});
    auto ids = (**prompter)(messages, /*add_generation_prompt=*/true);
    if (!ids) {
      fmt::print(stderr, "error: {}\n", ids.status().message());
      messages.pop_back();
      continue;
    }
    std::string reply;
    auto on_token = [&](int32_t, const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
      reply += text;
      return g_interrupts.load() == 0;
    };
    auto res = generate(**engine, *ids, opts, on_token, false);
    fmt::print("\n");
    if (!res) {
      fmt::print(stderr, "error: {}\n", res.status().message());
      messages.pop_back();
      continue;
    }
    messages.push_back({"assistant", reply});
    if (res->stats.stop_reason == "cancelled") fmt::print(stderr, "(stopped)\n");
    if (g_interrupts.load() > 1) break;
  }
  fmt::print(stderr, "bye\n");
  return 0;
}

}  // namespace

Subcommand add_chat_command(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* sub = add_subcommand(app, "chat", "Interactive chat in the terminal, with the model's chat template");
  add_model_option(*sub, args->model);
  sub->add_option("--system", args->system, "System prompt");
  sub->add_option("--chat-template", args->chat_template_file, "Jinja chat template file (default: the model's)");
  add_predict_option(*sub, args->n_predict, "Most tokens per reply (-1: until the model ends it)");
  add_context_option(*sub, args->ctx, "Context size in tokens");
  add_threads_option(*sub, args->threads);
  add_generation_options(*sub, args->sp, args->seed, args->stop);
  add_engine_options(*sub, args->engine);
  return {"chat", sub, [args] { return run_chat(*args); }};
}

}  // namespace pagoda
