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

#include "base/thread_pool.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "engine/generator.h"
#include "server/chat_prompt.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;

struct ChatArgs {
  std::string model;
  std::string system;
  std::string chat_template_file;
  int32_t n_predict = -1;
  int32_t ctx = 4096;
  int32_t threads = 0;
  SamplingParams sp;
  int64_t seed = -1;
  EngineArgs engine;
} g_args;

std::atomic<int> g_interrupts{0};
extern "C" void on_sigint(int) { g_interrupts.fetch_add(1); }

int run_chat() {
  auto loaded = load_model_with_tokenizer(g_args.model, g_args.threads, /*require_tokenizer=*/true);
  if (!loaded) return fail(loaded.status());
  Model& model = *loaded->model;
  std::unique_ptr<Tokenizer>& tokenizer = loaded->tokenizer;
  auto tpl_r = chat_template_source(*loaded->file, g_args.chat_template_file);
  if (!tpl_r) return fail(tpl_r.status());
  const std::string& tpl = *tpl_r;
  auto prompter = ChatPrompter::create(tpl, model.config().arch_name, *tokenizer);
  if (!prompter) return fail(prompter.status());
  const int32_t ctx = g_args.ctx > 0 ? std::min(g_args.ctx, model.config().n_ctx_train) : model.config().n_ctx_train;
  EngineArgs ea = g_args.engine;
  ea.max_num_seqs = 1;
  auto ec = engine_config(ea, ctx);
  if (!ec) return fail(ec.status());
  auto engine = Engine::create(model, tokenizer.get(), *ec);
  if (!engine) return fail(engine.status());

  std::signal(SIGINT, on_sigint);
  const bool tty = isatty(STDIN_FILENO) != 0;
  fmt::print(stderr, "pagoda chat: {} | context {} | template: {} | Ctrl-D or Ctrl-C to leave, /clear to start over\n",
             g_args.model, ctx, tpl.empty() ? (*prompter)->origin() : "model");
  ApiRequest conv;
  conv.chat = true;
  if (!g_args.system.empty()) conv.messages.push_back({"system", g_args.system});
  GenerateOptions opts;
  opts.max_tokens = g_args.n_predict;
  opts.sampling = g_args.sp;
  opts.sampling.seed = g_args.seed < 0 ? kRandomSeed : static_cast<uint64_t>(g_args.seed);
  std::string line;
  for (;;) {
    if (tty) fmt::print("\n> ");
    std::fflush(stdout);
    g_interrupts.store(0);
    if (!std::getline(std::cin, line)) break;  // Ctrl-D
    if (g_interrupts.load() > 0) break;
    if (line.empty()) continue;
    if (line == "/clear") {
      conv.messages.resize(g_args.system.empty() ? 0 : 1);
      fmt::print(stderr, "(conversation cleared)\n");
      continue;
    }
    conv.messages.push_back({"user", line});
    auto ids = (**prompter)(conv);
    if (auto* e = std::get_if<ApiError>(&ids)) {
      fmt::print(stderr, "error: {}\n", e->message);
      conv.messages.pop_back();
      continue;
    }
    std::string reply;
    auto on_token = [&](int32_t, const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
      reply += text;
      return g_interrupts.load() == 0;
    };
    auto res = generate(**engine, tokenizer.get(), std::get<std::vector<int32_t>>(ids), opts, on_token, false);
    fmt::print("\n");
    if (!res) {
      fmt::print(stderr, "error: {}\n", res.status().message());
      conv.messages.pop_back();
      continue;
    }
    conv.messages.push_back({"assistant", reply});
    if (res->stats.stop_reason == "cancelled") fmt::print(stderr, "(stopped)\n");
    if (g_interrupts.load() > 1) break;
  }
  fmt::print(stderr, "bye\n");
  return 0;
}

}  // namespace

Subcommand add_chat_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("chat", "Interactive chat in the terminal, with the model's chat template");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("-m,--model", g_args.model, "GGUF model file")->required();
  sub->add_option("--system", g_args.system, "System prompt");
  sub->add_option("--chat-template", g_args.chat_template_file, "Jinja chat template file (default: the model's)");
  sub->add_option("-n,--n-predict", g_args.n_predict, "Most tokens per reply (-1: until the model ends it)");
  sub->add_option("-c,--ctx-size", g_args.ctx, "Context size in tokens");
  sub->add_option("-t,--threads", g_args.threads, "Threads (default: all cores)");
  sub->add_option("--temp", g_args.sp.temperature, "Temperature (0: greedy)");
  sub->add_option("--top-k", g_args.sp.top_k, "Top-k (0: off)");
  sub->add_option("--top-p", g_args.sp.top_p, "Top-p (1: off)");
  sub->add_option("--min-p", g_args.sp.min_p, "Min-p (0: off)");
  sub->add_option("--repeat-penalty", g_args.sp.repeat_penalty, "Repetition penalty (1: off)");
  sub->add_option("-s,--seed", g_args.seed, "RNG seed (-1: random)");
  add_engine_options(*sub, g_args.engine);
  return {"chat", sub, run_chat};
}

}  // namespace pagoda
