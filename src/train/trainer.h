// `grove train`: trains a Llama-family model on a corpus made by `grove corpus`, from scratch with
// next-token cross-entropy or, given a teacher, by distillation on the teacher's full next-token
// distribution (KL), which raises a draft model's acceptance rate against that teacher.
//
// A run lives in one directory: RUN/checkpoint.gguf holds the parameters (a valid f32 llama GGUF),
// AdamW's moments, the step and every setting that shapes the result. Running the same command
// again resumes from it, and the resumed run ends with bit-identical parameters to one that never
// stopped: batches are drawn from (seed, step) alone and the state is saved exactly. Checkpoints
// are written through a temporary file and renamed, so an interruption never leaves a broken one.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "train/optimizer.h"
#include "train/train_model.h"

namespace grove {

class Tokenizer;

struct TrainOptions {
  std::string corpus_dir;      // train.txt and valid.txt
  std::string tokenizer_path;  // a GGUF with tokenizer.ggml.* keys (from `grove tokenizer-train`)
  std::string out_dir;         // the run directory
  std::string teacher_path;    // distill from this model (a GGUF); empty: plain cross-entropy
  // Fine-tune: start from this model's weights (a llama GGUF the trainer reads, any weight type it
  // dequantizes) instead of random ones; its shape replaces `shape`. Empty: random initialisation.
  std::string init_path;
  std::string name = "grove";  // general.name of the model files
  TrainShape shape;            // n_vocab is taken from the tokenizer
  OptimizerConfig optimizer;
  int32_t batch = 16;        // sequences per step
  int32_t seq_len = 256;     // tokens per sequence
  uint64_t seed = 1;         // initialisation and batch order
  int64_t eval_every = 200;  // steps between validation losses (and the last step)
  int32_t eval_batches = 4;  // batches of the validation part per evaluation
  int64_t checkpoint_every = 200;
  int32_t threads = 2;
};

// Throws grove::Error naming the option that is out of range.
void ValidateTrainOptions(const TrainOptions& o);

struct TrainProgress {
  int64_t step = 0;   // steps done
  int64_t steps = 0;  // total
  double loss = 0;    // of the last step (KL when distilling)
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;  // over this sitting
  double elapsed_s = 0;     // over all sittings
  double eta_s = 0;
  double valid_loss =
      NAN;  // cross-entropy on the validation part; NaN when not evaluated this step
  double valid_agreement = NAN;  // a drafter's: top-1 agreement with its target on that part
  std::vector<double> valid_agreement_by_depth;  // a parallel drafter's, depth 1 .. K + 1
  bool checkpointed = false;
};

struct TrainResult {
  int64_t step = 0;
  bool resumed = false;      // started from an existing checkpoint
  bool interrupted = false;  // stopped by the stop flag; the checkpoint holds the last step done
  int64_t train_tokens = 0;  // size of the tokenized training part
  int64_t valid_tokens = 0;
  int64_t n_params = 0;
  double last_valid_loss = NAN;
  double elapsed_s = 0;    // over all sittings
  std::string checkpoint;  // path
};

// Trains until optimizer.steps or until *stop becomes true (checked after each step). Calls
// `progress` after every step. Throws grove::Error for a missing or empty corpus, a tokenizer or
// teacher whose vocabulary does not match, or a checkpoint that is corrupt or was made with other
// settings (the message names the setting).
TrainResult Train(const TrainOptions& options,
                  const std::function<void(const TrainProgress&)>& progress,
                  const std::atomic<bool>* stop = nullptr);

// Tokenizes one corpus part: documents (separated by an empty line) each preceded by `eos`.
std::vector<int32_t> TokenizeCorpus(const Tokenizer& tokenizer, std::string_view text, int32_t eos);

// The corpus directory's training and validation parts, each through TokenizeCorpus and refused
// unless it holds `min_tokens`: "<command>: the validation part of '<dir>' has 40 tokens, fewer
// than <too_few>".
struct CorpusTokens {
  std::vector<int32_t> train;
  std::vector<int32_t> valid;
};
CorpusTokens TokenizeCorpusParts(const Tokenizer& tokenizer, const std::string& corpus_dir,
                                 int32_t eos, int64_t min_tokens, std::string_view command,
                                 std::string_view too_few);

// Offset in [0, n_tokens - seq_len - 1] of sequence b of a step's batch: a function of (seed, step,
// b) only, so a resumed run sees the same batches.
int64_t BatchOffset(uint64_t seed, int64_t step, int32_t b, int64_t n_tokens, int32_t seq_len);

// The offsets of a step's whole batch (BatchOffset of each b < offsets.size()).
void BatchOffsets(uint64_t seed, int64_t step, int64_t n_tokens, int32_t seq_len,
                  std::span<int64_t> offsets);

// The offsets of validation batch e of n_batches: the n_batches x offsets.size() windows are spread
// evenly over the text, the same ones at every validation.
void ValidationOffsets(int32_t e, int32_t n_batches, int64_t n_tokens, int32_t seq_len,
                       std::span<int64_t> offsets);

// Path of the checkpoint inside a run directory.
std::string CheckpointPath(const std::string& out_dir);

// A run's result before its first step: its checkpoint's path, the tokens of its two parts and
// the parameters it trains (the layout's, less the frozen ones).
TrainResult StartTrainResult(const std::string& out_dir, int64_t train_tokens, int64_t valid_tokens,
                             const ParamLayout& layout);

struct EvalResult {
  double loss = 0;          // mean next-token cross-entropy of the model
  double draft_loss = NAN;  // of the draft, when one is given
  double agreement = NAN;   // share of positions where the draft's argmax is the model's argmax
  int64_t positions = 0;
  int32_t windows = 0;  // windows evaluated: the request, at most what the text holds
};

// The most windows of seq_len tokens an evaluation reads from a text of n_tokens: as many as fit
// side by side, rounded up to whole batches. More would read the same positions again and only
// cost time (a window count of 10^9 used to run without bound), so a larger request is cut to it.
int32_t MaxEvalWindows(int64_t n_tokens, int32_t seq_len);

// Evaluates a model (and optionally a draft of the same vocabulary) on `windows` windows of seq_len
// tokens spread evenly over `tokens` (at most MaxEvalWindows): the loss, and the draft's greedy
// agreement with the model, which is the acceptance rate of a one-token greedy speculation.
// `progress(done, total)` is called after every batch of windows when given.
EvalResult EvaluateModels(const std::string& model_path, const std::string& draft_path,
                          const std::vector<int32_t>& tokens, int32_t seq_len, int32_t windows,
                          const std::function<void(int32_t, int32_t)>& progress = {});

}  // namespace grove
