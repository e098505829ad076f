#include "train/self_distill.h"

#include <algorithm>

#include "base/error.h"
#include "tokenize/tokenizer.h"

namespace grove {

namespace {

// The prompts decoded side by side, one lane per KV-cache slot; a lane whose document ends takes
// the next prompt.
class SelfDistillRun {
 public:
  SelfDistillRun(Model& target, std::span<const std::vector<int32_t>> prompts,
                 const SelfDistillOptions& options)
      : target_(target),
        prompts_(prompts),
        options_(options),
        tokenizer_(target.tokenizer()),
        sampler_(options.sampling),
        out_(prompts.size()),
        lanes_(static_cast<std::size_t>(target.n_seq())) {}

  std::vector<std::vector<int32_t>> Run(const std::function<void(int64_t, int64_t)>& progress) {
    for (std::size_t s = 0; s < lanes_.size(); ++s) Start(static_cast<int32_t>(s), lanes_[s]);
    while (Step()) {
      if (progress) progress(done_, tokens_);
    }
    return std::move(out_);
  }

 private:
  // The prompt a lane decodes (-1: idle), its next position, the token it feeds next.
  struct Lane {
    int64_t prompt = -1;
    int32_t position = 0;
    int32_t next = 0;
  };

  // Emits `token` for the lane's prompt; false when its document ends there.
  bool Emit(Lane& lane, int32_t token) {
    std::vector<int32_t>& text = out_[static_cast<std::size_t>(lane.prompt)];
    if (tokenizer_ && tokenizer_->IsEndOfGeneration(token)) return false;
    text.push_back(token);
    ++tokens_;
    lane.next = token;
    return static_cast<int32_t>(text.size()) < options_.max_new_tokens &&
           lane.position + 1 < target_.n_ctx();
  }

  // Gives the lane the next prompt that is not done at once (while the token budget lasts): its
  // prefill and first token. Idle when none is left.
  void Start(int32_t seq, Lane& lane) {
    while (queued_ < prompts_.size() &&
           (options_.token_budget <= 0 || tokens_ < options_.token_budget)) {
      lane.prompt = static_cast<int64_t>(queued_++);
      const std::vector<int32_t>& p = prompts_[static_cast<std::size_t>(lane.prompt)];
      target_.cache(seq).Clear();
      const std::span<const float> logits = target_.ForwardChain(p, 0, seq, prefill_, true);
      lane.position = static_cast<int32_t>(p.size());
      if (options_.max_new_tokens > 0 &&
          Emit(lane, sampler_.Sample(logits, static_cast<uint64_t>(lane.prompt), lane.position)))
        return;
      ++done_;
    }
    lane.prompt = -1;
  }

  // One token for every busy lane, in one forward; false when every lane is idle.
  bool Step() {
    step_.Clear();
    for (std::size_t s = 0; s < lanes_.size(); ++s) {
      if (lanes_[s].prompt >= 0)
        step_.Add(lanes_[s].next, lanes_[s].position, static_cast<int32_t>(s), -1, true);
    }
    if (step_.size() == 0) return false;
    const std::span<const float> logits = target_.Forward(step_);
    const auto n_vocab = static_cast<std::size_t>(target_.config().n_vocab);
    std::size_t row = 0;
    for (std::size_t s = 0; s < lanes_.size(); ++s) {
      Lane& lane = lanes_[s];
      if (lane.prompt < 0) continue;
      ++lane.position;
      const int32_t token = sampler_.Sample(logits.subspan(row++ * n_vocab, n_vocab),
                                            static_cast<uint64_t>(lane.prompt), lane.position);
      if (!Emit(lane, token)) {
        ++done_;
        Start(static_cast<int32_t>(s), lane);
      }
    }
    return true;
  }

  Model& target_;
  std::span<const std::vector<int32_t>> prompts_;
  const SelfDistillOptions& options_;
  const Tokenizer* tokenizer_;
  Sampler sampler_;
  std::vector<std::vector<int32_t>> out_;
  std::vector<Lane> lanes_;
  std::size_t queued_ = 0;
  int64_t done_ = 0, tokens_ = 0;
  Batch prefill_, step_;
};

}  // namespace

std::vector<std::vector<int32_t>> SelfDistill(
    Model& target, std::span<const std::vector<int32_t>> prompts, const SelfDistillOptions& options,
    const std::function<void(int64_t, int64_t)>& progress) {
  for (const std::vector<int32_t>& p : prompts) {
    if (p.empty() || static_cast<int32_t>(p.size()) >= target.n_ctx())
      Fail("self-distill: a prompt of ", p.size(), " tokens for a context of ", target.n_ctx());
  }
  return SelfDistillRun(target, prompts, options).Run(progress);
}

}  // namespace grove
