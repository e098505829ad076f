// One drafter of a mixture (speculate/drafter_mixture.h) and what the mixture keeps of it: how
// often its word has been right (what ranks its candidates, mixture_ranking.h), what it costs and
// how it has done when confident at the root (what decides whether it takes part in a step,
// mixture_member_choice.h), and this step's first choices (what all of them, and the chains'
// learning, mixture_chain_learning.h, read).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "speculate/call_cost.h"
#include "speculate/drafter.h"
#include "speculate/lookup_matches.h"

namespace grove {

// What the mixture saw of one member, for reports.
struct MixtureMemberStats {
  std::string name;
  double weight = 0.0;          // its current weight
  int64_t steps = 0;            // steps it took part in
  int64_t skipped = 0;          // steps it was skipped in
  int64_t first_choices = 0;    // path nodes it expanded
  int64_t right = 0;            // ... where its first choice was the token that followed
  int64_t nodes = 0;            // tree nodes it proposed (with others or alone)
  int64_t accepted_nodes = 0;   // ... that the target accepted
  double expand_seconds = 0.0;  // in its Expand calls
};

struct MixtureMember {
  static constexpr double kWeightMemory = 32.0;  // steps the moving averages remember
  static constexpr int kShareBuckets = 5;
  static int Bucket(float share) {
    return std::clamp(static_cast<int>(share * kShareBuckets), 0, kShareBuckets - 1);
  }
  // A row is confident when its first choice takes at least this share of it.
  static constexpr float kConfidentShare = 0.5f;
  static constexpr int32_t kNotExpanded = -2;  // first_choice

  // Starts from a hit rate of each bucket's middle: as if calibrated.
  explicit MixtureMember(std::unique_ptr<Drafter> member)
      : drafter(std::move(member)), lookup(drafter->lookup_matches()) {
    for (int b = 0; b < kShareBuckets; ++b)
      bucket_hit[b] = disputed_hit[b] = (b + 0.5) / kShareBuckets;
    stats.name = std::string(drafter->name());
  }

  // A running mean over the first `count` outcomes, then a moving average over kWeightMemory:
  // the first few count fully.
  static void Track(double& mean, bool right, double count) {
    mean += ((right ? 1.0 : 0.0) - mean) / std::min(count, kWeightMemory);
  }

  // Its chance of being right about its first choice when the row gives it `share`.
  double Calibrated(float share) const { return bucket_hit[Bucket(share)]; }
  // The same over the rows where the active members' first choices differed, which is what ranks
  // one member's guess against another's: rows where they agree are the predictable ones and
  // flatter a member that only repeats the text (a suffix match, sure of a template's words and
  // of another problem's numbers alike).
  double CalibratedWhenDisputed(float share) const { return disputed_hit[Bucket(share)]; }
  // Its first choice at the node of `slot` (frontier node + 1; 0: the root): -1 where it proposes
  // nothing there, kNotExpanded where it did not expand the node.
  int32_t FirstChoice(std::size_t slot) const {
    return slot < first_choice.size() ? first_choice[slot] : kNotExpanded;
  }
  // Forgets this step (Commit).
  void EndStep() {
    active = false;
    root_done = false;
    confident_root = false;
    long_match_root = false;
    std::fill(first_choice.begin(), first_choice.end(), kNotExpanded);
  }

  std::unique_ptr<Drafter> drafter;
  const LookupMatches* lookup = nullptr;  // its capability, when it looks its rows up in text
  double weight = 0.5;                    // first-choice hit rate, moving average
  // How often its first choice was right when its row gave that choice a share in each
  // kShareBuckets-th of [0, 1], over every row and over the disputed ones.
  std::array<double, kShareBuckets> bucket_hit{};
  std::array<int64_t, kShareBuckets> bucket_seen{};
  std::array<double, kShareBuckets> disputed_hit{};
  std::array<int64_t, kShareBuckets> disputed_seen{};
  double confident_hit = 0.5;   // the same over confident root rows only
  int64_t confident_seen = 0;   // confident root rows judged
  CallCost call_cost;           // of one Expand call
  bool active = false;          // takes part in this step
  bool cheap = false;           // costs little next to the dearest (this step's view)
  bool root_done = false;       // expanded the root this step
  bool confident_root = false;  // its root row this step was confident
  // Its root row this step followed a match of a long match's tokens (LookupMatches).
  bool long_match_root = false;
  // By frontier node this step (node + 1; 0: the root): -1 where it proposes nothing there,
  // kNotExpanded where it did not expand the node.
  std::vector<int32_t> first_choice;
  std::vector<float> first_share;  // the share its row gave that choice
  MixtureMemberStats stats;
};

}  // namespace grove
