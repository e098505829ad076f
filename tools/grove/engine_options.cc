#include "engine_options.h"

#include "base/error.h"
#include "base/named.h"
#include "option_checks.h"

namespace grove::cli {
namespace {

// The names DraftSource::Open knows (speculate/draft_source.h).
constexpr char kDraftNames[] =
    "a draft GGUF (same vocabulary: a draft model, or a feature or parallel drafter), 'ngram' "
    "(prompt lookup) or 'suffix' (suffix drafting from the text and every earlier output of this "
    "process)";
constexpr char kBundledDrafter[] =
    "default with the bundled target: its draft mixed with suffix drafting, DRAFT.gguf+suffix";

// What -m's help says for each role.
constexpr Named<ModelRole> kModelHelp[] = {
    {ModelRole::kTarget,
     "GGUF model file: the target (default: the bundled pair in models/, --pair)"},
    {ModelRole::kRequiredTarget, "GGUF model file: the target"},
    {ModelRole::kModel, "GGUF model file"},
    {ModelRole::kVocabulary, "GGUF model or vocabulary file"}};

std::string DraftHelp(DraftRole role) {
  switch (role) {
    case DraftRole::kDrafter:
      return StrCat("Speculate with ", kDraftNames, " (", kBundledDrafter, ")");
    case DraftRole::kDrafterOrNone:
      return StrCat("Speculate with ", kDraftNames, ", or 'none' not to speculate (",
                    kBundledDrafter, ")");
    case DraftRole::kBundledModel:
      return "Draft GGUF model, of the target's vocabulary (default: the bundled pair's draft)";
    case DraftRole::kModel:
      return "Draft GGUF model, of the target's vocabulary";
  }
  return "";
}

// --device and --draft-device take the same names.
void AddComputeDeviceOption(CLI::App& cmd, const char* name, std::string& device,
                            const char* help) {
  cmd.add_option(name, device, help)
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

}  // namespace

void AddModelOption(CLI::App& cmd, std::string& model, ModelRole role) {
  CLI::Option* option =
      cmd.add_option("-m,--model", model, std::string(NameOf(kModelHelp, role, "")));
  if (role != ModelRole::kTarget) option->required();
}

void AddModelsOption(CLI::App& cmd, std::vector<std::string>& models) {
  cmd.add_option("-m,--model", models, "GGUF model file (repeat for several)")->required();
}

CLI::Option* AddDraftOption(CLI::App& cmd, std::string& draft, DraftRole role) {
  return cmd.add_option("--draft", draft, DraftHelp(role));
}

void AddDraftsOption(CLI::App& cmd, std::vector<std::string>& drafts) {
  cmd.add_option("--draft", drafts,
                 StrCat("With --spec: ", kDraftNames, "; repeat to compare drafters in one run"));
}

void AddThreadsOption(CLI::App& cmd, int& threads, const std::string& whose) {
  cmd.add_option("-t,--threads", threads,
                 StrCat("Threads", whose.empty() ? "" : " ", whose, " (0: all hardware threads)"))
      ->capture_default_str()
      ->check(ThreadCount());
}

void AddPositiveThreadsOption(CLI::App& cmd, int& threads, const std::string& whose) {
  cmd.add_option("-t,--threads", threads,
                 StrCat("Threads", whose.empty() ? "" : " ", whose, " (at least 1)"))
      ->capture_default_str()
      ->check(PositiveThreadCount());
}

void AddThreadCountsOption(CLI::App& cmd, std::vector<int>& threads) {
  cmd.add_option("-t,--threads", threads,
                 "Thread counts, comma-separated (default: all hardware threads)")
      ->delimiter(',')
      ->check(ThreadCount());
}

void AddContextOption(CLI::App& cmd, int32_t& n_ctx) {
  cmd.add_option("-c,--ctx-size", n_ctx,
                 StrCat("Context size in tokens, at most the model's (0: the model's, at most ",
                        kDefaultContextCap, ")"))
      ->capture_default_str();
}

void AddAcceptOption(CLI::App& cmd, std::string& accept_file) {
  cmd.add_option("--accept", accept_file,
                 "Acceptance vector JSON from `grove calibrate`, for sequoia trees and auto's "
                 "first plans (default: the bundled pair's, with its models)");
}

void AddDeviceOption(CLI::App& cmd, std::string& device) {
  AddComputeDeviceOption(cmd, "--device", device,
                         "Where the models compute: cpu, cuda (an NVIDIA GPU: weights, KV cache "
                         "and the whole step there) or auto (the GPU when one is present and "
                         "takes the model, else the CPU)");
}

void AddDraftDeviceOption(CLI::App& cmd, std::string& device) {
  AddComputeDeviceOption(cmd, "--draft-device", device,
                         "Where a draft model computes: cpu, cuda or auto (where the target "
                         "does; a draft too small to fill a GPU can be faster on the CPU, "
                         "docs/cuda.md)");
}

void AddCacheTypeOption(CLI::App& cmd, std::string& type) {
  cmd.add_option("--cache-type", type,
                 "KV cache element type: f32, or f16 (half the memory and what attention reads "
                 "at long contexts; llama.cpp's default). A draft model's follows the target's; "
                 "the GPU keeps f32")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
}

}  // namespace grove::cli
