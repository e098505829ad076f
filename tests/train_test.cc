// The trainer end to end on a tiny corpus: the loss goes down, a resumed run is bit-identical to an
// uninterrupted one, the exported model means the same to the inference engine, and bad input gives
// clear errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/gguf.h"
#include "model/batch.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenize/tokenizer.h"
#include "train/bpe_trainer.h"
#include "train/corpus.h"
#include "train/corpus_files.h"
#include "train/model_file.h"
#include "train/trainer.h"

namespace grove {
namespace {

namespace fs = std::filesystem;
using testing::TempPath;

// A corpus of ~20k words and a 384-token tokenizer, made once for all tests.
struct TinyData {
  std::string dir;
  std::string tokenizer;
};

const TinyData& Data() {
  static const TinyData data = [] {
    TinyData d;
    d.dir = TempPath("train-corpus");
    fs::remove_all(d.dir);
    const Corpus corpus = GenerateCorpus({.seed = 3, .target_words = 20000});
    WriteCorpusFiles(corpus, d.dir);
    const std::string_view texts[] = {corpus.train};
    d.tokenizer = d.dir + "/tok.gguf";
    WriteBpeTokenizerGguf(TrainBpe(texts, {.vocab_size = 384}), d.tokenizer);
    return d;
  }();
  return data;
}

TrainOptions TinyOptions(const std::string& out, int64_t steps) {
  TrainOptions o;
  o.corpus_dir = Data().dir;
  o.tokenizer_path = Data().tokenizer;
  o.out_dir = out;
  o.shape = {.n_embd = 32, .n_layer = 2, .n_head = 2, .n_ff = 64, .n_ctx = 64};
  o.optimizer = {.lr = 1e-2, .warmup = std::min<int64_t>(10, steps), .steps = steps};
  o.batch = 8;
  o.seq_len = 32;
  o.eval_every = 1000;
  o.eval_batches = 2;
  o.checkpoint_every = 1000;
  o.threads = 1;
  return o;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = TempPath(name);
  fs::remove_all(dir);
  return dir;
}

std::vector<uint8_t> TensorBytes(const GgufFile& f, const std::string& name) {
  const GgufTensor& t = f.GetTensor(name);
  return {t.data, t.data + t.n_bytes};
}

TEST(Trainer, LossFallsBelowBoundOnTinyCorpus) {
  const TrainOptions o = TinyOptions(FreshDir("train-loss"), 300);
  double first_loss = 0;
  const TrainResult r = Train(o, [&](const TrainProgress& p) {
    if (p.step == 1) first_loss = p.loss;
  });
  EXPECT_EQ(r.step, 300);
  // A uniform guess over 384 tokens costs ln 384 = 5.95 nats, and the best model that ignores
  // context costs the entropy of the validation tokens' frequencies. After 300 steps the model must
  // beat that by a wide margin, i.e. it has learned to use the context.
  auto gguf = GgufFile::Open(Data().tokenizer);
  auto tok = Tokenizer::FromGguf(*gguf);
  const std::vector<int32_t> valid =
      TokenizeCorpus(*tok, ReadCorpusFile(Data().dir, kCorpusValidFile), 0);
  std::vector<double> counts(384);
  for (int32_t t : valid) counts[static_cast<std::size_t>(t)] += 1;
  double unigram = 0;
  for (double c : counts) {
    if (c > 0) unigram -= c / valid.size() * std::log(c / valid.size());
  }
  EXPECT_GT(first_loss, 5.5);
  EXPECT_LT(r.last_valid_loss, unigram - 1.0)
      << "first loss " << first_loss << ", unigram entropy " << unigram;
}

TEST(Trainer, ResumeIsBitIdenticalToAnUninterruptedRun) {
  const std::string straight = FreshDir("train-straight"), resumed = FreshDir("train-resumed");
  TrainOptions o = TinyOptions(straight, 24);
  o.eval_every = 5;  // evaluations in between must not disturb anything
  Train(o, {});
  // The same run stopped as Ctrl-C would stop it: the flag is raised during step 10, which
  // finishes and is saved; then the same options run again.
  o.out_dir = resumed;
  std::atomic<bool> stop{false};
  const TrainResult first = Train(
      o, [&](const TrainProgress& p) { stop = p.step >= 9; }, &stop);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.step, 10);
  const TrainResult second = Train(o, {});
  EXPECT_TRUE(second.resumed);
  EXPECT_EQ(second.step, 24);

  auto a = GgufFile::Open(CheckpointPath(straight));
  auto b = GgufFile::Open(CheckpointPath(resumed));
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const GgufTensor& t : a->tensors())
    EXPECT_EQ(TensorBytes(*a, t.name), TensorBytes(*b, t.name)) << t.name;
}

TEST(Trainer, SameSeedSameModelOtherSeedOtherModel) {
  const std::string d1 = FreshDir("train-seed-1"), d2 = FreshDir("train-seed-2"),
                    d3 = FreshDir("train-seed-3");
  TrainOptions o = TinyOptions(d1, 5);
  Train(o, {});
  o.out_dir = d2;
  Train(o, {});
  o.out_dir = d3;
  o.seed = 2;
  Train(o, {});
  auto f1 = GgufFile::Open(CheckpointPath(d1)), f2 = GgufFile::Open(CheckpointPath(d2)),
       f3 = GgufFile::Open(CheckpointPath(d3));
  EXPECT_EQ(TensorBytes(*f1, "blk.0.attn_q.weight"), TensorBytes(*f2, "blk.0.attn_q.weight"));
  EXPECT_NE(TensorBytes(*f1, "blk.0.attn_q.weight"), TensorBytes(*f3, "blk.0.attn_q.weight"));
}

// The trainer's forward and the inference engine's agree on an exported f32 model, so what was
// trained is what `grove run` computes.
TEST(Trainer, ExportedModelGivesTheTrainersLogitsInTheInferenceEngine) {
  const std::string dir = FreshDir("train-export");
  TrainOptions o = TinyOptions(dir, 30);
  o.shape.tied_output = false;
  Train(o, {});
  auto ckpt = GgufFile::Open(CheckpointPath(dir));
  const LoadedTrainModel m = LoadTrainModel(*ckpt);
  const ParamLayout layout(m.shape);
  const std::string exported = dir + "/model-f32.gguf";
  TrainedModelWriter(layout, m.params.data(), m.tokenizer, GgmlType::kF32, "t").WriteFile(exported);

  const int T = 20;
  std::vector<int32_t> tokens(T);
  for (int i = 0; i < T; ++i) tokens[static_cast<std::size_t>(i)] = (i * 37 + 5) % m.shape.n_vocab;
  TrainGraph graph(layout, 1, T);
  graph.Forward(m.params.data(), tokens.data(), nullptr);

  auto model = Model::Load(exported);
  Batch batch;
  batch.AddChain(tokens, 0, 0, /*all_logits=*/true);
  const std::span<const float> logits = model->Forward(batch);
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(T) * m.shape.n_vocab);
  double worst = 0;
  for (std::size_t i = 0; i < logits.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(logits[i]) - graph.logits()[i]));
  EXPECT_LT(worst, 2e-3);

  // Quantized exports load too and stay close.
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0}) {
    const std::string path = dir + "/model-q.gguf";
    TrainedModelWriter(layout, m.params.data(), m.tokenizer, type, "t").WriteFile(path);
    auto q = Model::Load(path);
    const std::span<const float> ql = q->Forward(batch);
    double diff = 0;
    for (std::size_t i = 0; i < ql.size(); ++i)
      diff = std::max(diff, std::fabs(static_cast<double>(ql[i]) - graph.logits()[i]));
    EXPECT_LT(diff, 0.15) << GgmlTypeName(type);
  }
}

TEST(Trainer, DistillationMovesTheStudentTowardTheTeacher) {
  const std::string teacher_dir = FreshDir("train-teacher"),
                    student_dir = FreshDir("train-student");
  Train(TinyOptions(teacher_dir, 150), {});
  TrainOptions o = TinyOptions(student_dir, 100);
  o.shape = {.n_embd = 16, .n_layer = 1, .n_head = 2, .n_ff = 32, .n_ctx = 64};
  o.teacher_path = CheckpointPath(teacher_dir);
  double first = 0, last = 0;
  Train(o, [&](const TrainProgress& p) {
    if (p.step == 1) first = p.loss;
    last = p.loss;
  });
  EXPECT_LT(last, 0.5 * first) << "KL to the teacher should fall";
}

// --init starts from a model's weights and shape (fine-tuning a draft on recorded traffic): its
// first step's loss is the trained model's, far below a random start's, whatever shape the
// options held; another vocabulary is refused.
TEST(Trainer, InitStartsFromAModelsWeightsAndShape) {
  const std::string base = FreshDir("train-init-base"), tuned = FreshDir("train-init-tuned"),
                    fresh = FreshDir("train-init-fresh");
  Train(TinyOptions(base, 150), {});
  double trained_loss = 0;
  {
    TrainOptions o = TinyOptions(FreshDir("train-init-probe"), 1);
    o.init_path = CheckpointPath(base);
    o.optimizer.lr = 1e-12;
    Train(o, [&](const TrainProgress& p) { trained_loss = p.loss; });
  }
  double random_loss = 0;
  Train(TinyOptions(fresh, 1), [&](const TrainProgress& p) { random_loss = p.loss; });
  EXPECT_LT(trained_loss, 0.8 * random_loss);
  TrainOptions o = TinyOptions(tuned, 5);
  o.shape = {.n_embd = 16, .n_layer = 1, .n_head = 2, .n_ff = 32, .n_ctx = 64};  // replaced
  o.init_path = CheckpointPath(base);
  Train(o, {});
  auto from = GgufFile::Open(CheckpointPath(base)), to = GgufFile::Open(CheckpointPath(tuned));
  EXPECT_EQ(to->GetTensor("blk.1.attn_q.weight").n_bytes,
            from->GetTensor("blk.1.attn_q.weight").n_bytes)
      << "the init model's shape";
  // A model of another vocabulary.
  RandomModelSpec other = testing::TinySpec();
  other.n_vocab = 300;
  other.n_head_kv = other.n_head;  // a shape the trainer reads
  other.n_rot = 0;
  const std::string other_path = TempPath("train-init-other.gguf");
  RandomModelWriter(other).WriteFile(other_path);
  TrainOptions bad = TinyOptions(FreshDir("train-init-bad"), 1);
  bad.init_path = other_path;
  try {
    Train(bad, {});
    ADD_FAILURE() << "trained from another vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another vocabulary"), std::string::npos) << e.what();
  }
}

TEST(Trainer, CorpusIsTokenizedWithEndOfTextBetweenDocuments) {
  auto gguf = GgufFile::Open(Data().tokenizer);
  auto tok = Tokenizer::FromGguf(*gguf);
  const int32_t eos = static_cast<int32_t>(gguf->GetUint("tokenizer.ggml.eos_token_id"));
  const std::string text = "One day.\nTwo.\n\nThree four.\n";
  const std::vector<int32_t> ids = TokenizeCorpus(*tok, text, eos);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], eos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eos), 2);
  const auto second = std::find(ids.begin() + 1, ids.end(), eos);
  EXPECT_EQ(tok->Decode(std::vector<int32_t>(ids.begin() + 1, second)), "One day.\nTwo.\n");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>(second + 1, ids.end())), "Three four.\n");
  // Batch offsets depend on (seed, step, b) only and stay in range.
  for (int64_t step = 0; step < 50; ++step) {
    const int64_t off = BatchOffset(1, step, 3, 1000, 32);
    EXPECT_GE(off, 0);
    EXPECT_LE(off, 1000 - 32 - 1);
    EXPECT_EQ(off, BatchOffset(1, step, 3, 1000, 32));
  }
}

void ExpectTrainError(const TrainOptions& o, const std::string& fragment) {
  try {
    Train(o, {});
    ADD_FAILURE() << "no error; expected one containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Trainer, BadInputGivesClearErrors) {
  TrainOptions o = TinyOptions(FreshDir("train-bad"), 5);
  {
    TrainOptions b = o;
    b.corpus_dir = TempPath("no-such-corpus");
    ExpectTrainError(b, "no-such-corpus");
  }
  {
    const std::string empty = FreshDir("train-empty-corpus");
    fs::create_directories(empty);
    std::ofstream(empty + "/train.txt");
    std::ofstream(empty + "/valid.txt");
    TrainOptions b = o;
    b.corpus_dir = empty;
    ExpectTrainError(b, "empty");
  }
  {
    TrainOptions b = o;
    b.optimizer.lr = 0;
    ExpectTrainError(b, "--lr");
    b = o;
    b.optimizer.warmup = 10;
    ExpectTrainError(b, "--warmup");
    b = o;
    b.shape.n_head = 3;
    ExpectTrainError(b, "heads do not divide");
    b = o;
    b.seq_len = 1000;
    ExpectTrainError(b, "exceeds the context");
  }
  // A finished run resumed with other settings names the setting.
  Train(o, {});
  {
    TrainOptions b = o;
    b.optimizer.lr = 5e-3;
    ExpectTrainError(b, "lr");
    b = o;
    b.shape.n_embd = 64;
    ExpectTrainError(b, "asks for dim 64");
  }
  // Another tokenizer than the checkpoint's.
  {
    const Corpus other = GenerateCorpus({.seed = 9, .target_words = 5000});
    const std::string_view texts[] = {other.train};
    const std::string other_tok = TempPath("train-other-tok.gguf");
    WriteBpeTokenizerGguf(TrainBpe(texts, {.vocab_size = 384}), other_tok);
    TrainOptions b = o;
    b.tokenizer_path = other_tok;
    ExpectTrainError(b, "another tokenizer");
    // ... and as a teacher's vocabulary.
    b = o;
    b.out_dir = FreshDir("train-bad-teacher");
    b.teacher_path = CheckpointPath(o.out_dir);
    b.tokenizer_path = other_tok;
    ExpectTrainError(b, "another vocabulary");
  }
  // A truncated checkpoint is refused by name, never half-loaded.
  {
    const std::string path = CheckpointPath(o.out_dir);
    fs::resize_file(path, fs::file_size(path) / 2);
    ExpectTrainError(o, "checkpoint.gguf");
  }
}

}  // namespace
}  // namespace grove
