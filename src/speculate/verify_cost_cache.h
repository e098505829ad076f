// The verify curves `auto` has measured, kept between runs: one file per (model shape, machine) in
// the user's cache directory, so that a run starts decoding with the curve a run before it
// measured instead of measuring it again (about 0.2-0.7 s for the bundled pair).
//
// A curve depends on what the target's forward computes and on what computes it, not on the
// weights' values: the key is the model's shape (architecture, every tensor's name, type and shape,
// the attention hyperparameters) and file size, the CPU's name and features, the kernels in use
// and their revision (kKernelsRevision: their speed changes between versions), the thread count,
// the largest batch, the KV cache's element type, and the grove version. A
// file older than kMaxAgeDays is measured again. A curve may be partial: runs extend it by what
// their decoding time (summed over runs) allows (see AutoPlanner), until it is complete.
//
// Where: $GROVE_CACHE_DIR if set (set and empty: no caching), else $XDG_CACHE_HOME/grove, else
// $HOME/.cache/grove. A corrupt or foreign file is ignored with a one-line notice and rewritten; a
// link, FIFO or device at a curve's path is never replaced (speculate/own_file.h); a directory
// that cannot be created or written means no caching, not an error.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"

namespace grove {

struct CachedVerifyCost {
  // A size is measured again in another run until its times agree: other work on the machine
  // only ever slows a forward, and a curve measured while something else ran (a size 3.5x its
  // real cost) was kept for a month and made auto choose trees half the size that wins. Up to
  // kMaxSamples times per size; the first two agree when within kAgreement of each other.
  static constexpr std::size_t kMaxSamples = 3;
  static constexpr double kAgreement = 1.2;

  std::vector<std::pair<int32_t, double>>
      points;  // (n, seconds), n increasing from 1, not every size; may be empty. Derived from
               // `samples` (each size's time, raised to that of a smaller confirmed size: more
               // tokens never cost less) wherever samples are kept
  // What was measured per size (n increasing, as points): for n = 1 seconds, for larger n the
  // ratio to a t(1) timed beside it (runs measure at whatever context they have reached, and
  // attention grows with it); a point is t(1) times its ratio. Of a size's samples the lower of
  // two counts (confirmed if they agree, else until a third decides), of three the median. Empty
  // where only points were given (a profile, a version-1 file): each point then counts as one
  // sample, not yet confirmed.
  std::vector<std::pair<int32_t, std::vector<double>>> samples;
  bool complete = false;  // every size worth measuring is measured and confirmed (see AutoPlanner)
  // Decoding time runs have spent with this curve since it was last extended: what pays for the
  // next extension (AutoPlanner spends a share of it), so that short runs pay together.
  double decode_seconds = 0.0;
  // When the points were last measured (seconds since the epoch; 0: now, when stored). Runs that
  // only add decoding time keep it, so a curve in daily use still ages.
  int64_t measured_at = 0;

  // Adds what was measured for n (seconds for n = 1, else a ratio to t(1)) and derives points
  // again.
  void AddSample(int32_t n, double sample);
  // Whether n has a time, and whether its times agree (see above).
  bool Measured(int32_t n) const;
  bool Confirmed(int32_t n) const;
  // points from samples (unchanged where no samples are kept).
  void DerivePoints();
  // Where only points are given (no samples), each point as one sample, not yet confirmed.
  void SeedSamplesFromPoints();
};

// What a kept curve depends on (see the file comment), field by field, as the key writes it: two
// targets share a curve exactly when every field is equal.
struct VerifyCostKey {
  std::string arch;          // the model's architecture
  std::string shape;         // ModelParameters::ShapeFingerprint: tensors, attention, file size
  std::string cpu;           // the CPU's model name
  std::string cpu_features;  // the features the kernels may use
  std::string kernels;       // the kernel set in use
  int kernels_revision = 0;  // kKernelsRevision: their speed changes between versions
  int32_t threads = 0;       // the target's pool
  int32_t batch = 0;         // the largest verify batch
  std::string kv;            // the KV cache's element type
  std::string version;       // grove's

  // The key of `target` as loaded (with its threads and batch), on this machine and build.
  static VerifyCostKey Of(const Model& target);
  // The key as one line (what a file keeps and its name hashes).
  std::string Text() const;
  bool operator==(const VerifyCostKey&) const = default;
};

class VerifyCostCache {
 public:
  static constexpr int kMaxAgeDays = 30;

  // The default place (see above); "" when caching is off or no home is known.
  static std::string DefaultDirectory();

  // dir "": a cache that keeps nothing.
  explicit VerifyCostCache(std::string dir) : dir_(std::move(dir)) {}

  bool enabled() const { return !dir_.empty(); }
  const std::string& directory() const { return dir_; }

  // VerifyCostKey::Of(target).Text(), and the file it names.
  static std::string KeyFor(const Model& target) { return VerifyCostKey::Of(target).Text(); }
  std::string PathFor(const std::string& key) const;

  // The curve kept for `target`; nullopt when there is none, it is stale, or it cannot be used
  // (with a notice).
  std::optional<CachedVerifyCost> Load(const Model& target) const;
  // Keeps `curve` for `target`, replacing what was kept; a failure to write is logged (debug), not
  // thrown.
  void Store(const Model& target, const CachedVerifyCost& curve) const;

 private:
  std::string dir_;
};

}  // namespace grove
