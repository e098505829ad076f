// grove run -m MODEL -p PROMPT: stream generated text, then a stats line.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/timer.h"
#include "commands.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "sample/sampler.h"

namespace grove::cli {
namespace {

std::atomic<bool> g_interrupted{false};

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int32_t n_predict = 128;
  SamplerParams sampling;
  int64_t seed = -1;
  int threads = 0;
  int32_t n_ctx = 0;
  bool no_bos = false;
  bool ignore_eos = false;
  bool no_display_prompt = false;
  bool verbose = false;
};

void RunGenerate(RunOptions o) {
  InstallStderrLog(o.verbose);
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) Fail("cannot read prompt file '", o.prompt_file, "'");
    std::stringstream ss;
    ss << in.rdbuf();
    o.prompt = ss.str();
  }
  o.sampling.seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : std::random_device{}();
  o.sampling.Validate();
  if (o.n_predict < 0) Fail("-n ", o.n_predict, " must be >= 0");
  if (o.threads < 0) Fail("-t ", o.threads, " must be >= 0");

  ModelOptions mo;
  mo.n_threads = o.threads;
  mo.n_ctx = o.n_ctx;
  Timer load_timer;
  auto model = Model::Load(o.model, mo);
  const double load_s = load_timer.Seconds();
  const Tokenizer* tok = model->tokenizer();
  if (!tok) Fail("'", o.model, "' has no tokenizer (no 'tokenizer.ggml.model'); cannot run a text prompt");

  std::vector<int32_t> prompt = tok->Encode(o.prompt, !o.no_bos && tok->add_bos_by_default());
  if (prompt.empty()) Fail("the prompt is empty and the model has no BOS token to start from");
  if (static_cast<int64_t>(prompt.size()) >= model->n_ctx()) {
    Fail("the prompt is ", prompt.size(), " tokens but the context holds ", model->n_ctx(),
         " (raise it with -c, up to the model's ", model->config().n_ctx_train, ")");
  }
  if (!o.no_display_prompt) {
    std::fputs(o.prompt.c_str(), stdout);
    std::fflush(stdout);
  }

  Sampler sampler(o.sampling);
  Batch batch;
  batch.tokens.reserve(model->max_batch());
  // With an empty prompt the text starts at the first generated token: drop its SentencePiece space.
  TokenStreamDecoder decoder(*tok, /*strip_leading_space=*/o.prompt.empty());

  // Prefill in chunks of max_batch; only the last token's logits are needed.
  Timer prompt_timer;
  std::span<const float> logits;
  for (std::size_t begin = 0; begin < prompt.size(); begin += model->max_batch()) {
    const std::size_t end = std::min(prompt.size(), begin + model->max_batch());
    batch.Clear();
    batch.AddChain(std::span<const int32_t>(prompt).subspan(begin, end - begin), static_cast<int32_t>(begin), 0);
    logits = model->Forward(batch);
  }
  const double prompt_s = prompt_timer.Seconds();

  std::signal(SIGINT, [](int) { g_interrupted = true; });
  Timer gen_timer;
  int32_t n_generated = 0;
  int32_t position = static_cast<int32_t>(prompt.size());
  const char* stop_reason = "length";
  while (n_generated < o.n_predict) {
    const int32_t token = sampler.Sample(logits, 0, position);
    ++n_generated;
    if (!o.ignore_eos && tok->IsEndOfGeneration(token)) {
      stop_reason = "end of text";
      break;
    }
    std::string piece = decoder.Push(token);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (n_generated == o.n_predict) break;
    if (position + 1 >= model->n_ctx()) {
      stop_reason = "context full";
      break;
    }
    if (g_interrupted) {
      stop_reason = "interrupted";
      break;
    }
    batch.Clear();
    batch.Add(token, position, 0, -1, true);
    logits = model->Forward(batch);
    ++position;
  }
  std::string tail = decoder.Flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::signal(SIGINT, SIG_DFL);
  const double gen_s = gen_timer.Seconds();
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr,
               "\n[grove] load %.2f s | prompt %zu tokens, %.1f t/s | generation %d tokens, %.1f t/s "
               "| stop: %s | threads %d, ctx %d, seed %llu\n",
               load_s, prompt.size(), prompt.size() / std::max(prompt_s, 1e-9), n_generated,
               n_generated / std::max(gen_s, 1e-9), stop_reason, model->pool().size(), model->n_ctx(),
               static_cast<unsigned long long>(o.sampling.seed));
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  auto o = std::make_shared<RunOptions>();
  cmd->add_option("-m,--model", o->model, "GGUF model file")->required();
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "Prompt text (default: empty, start from BOS)");
  cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temp", o->sampling.temperature, "Temperature; 0 is greedy")->capture_default_str();
  cmd->add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens; 0 disables")->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus sampling mass in (0, 1]; 1 disables")->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p, "Drop tokens below min-p x the top probability; 0 disables")
      ->capture_default_str();
  cmd->add_option("-s,--seed", o->seed, "Random seed (-1: random, printed in the stats)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all hardware threads)")->capture_default_str();
  cmd->add_option("-c,--ctx-size", o->n_ctx, "Context size in tokens (0: the model's, at most 4096)")
      ->capture_default_str();
  cmd->add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-text tokens");
  cmd->add_flag("--no-display-prompt", o->no_display_prompt, "Print only the generated text");
  cmd->add_flag("-v,--verbose", o->verbose, "Print debug diagnostics");
  cmd->callback([o] { RunGenerate(*o); });
}

}  // namespace grove::cli
