#include "tot/thought_search.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "base/timer.h"
#include "tasks/game24_answer.h"
#include "tasks/game24_prompts.h"
#include "tot/sequence_key.h"

namespace grove {
namespace {

constexpr int32_t kMaxThoughts = 1024;
constexpr int32_t kMaxBreadth = 1024;
constexpr int32_t kMaxSteps = 64;
constexpr int32_t kMaxTokens = 1 << 20;
constexpr std::size_t kMinPuzzleNumbers = 2;
constexpr std::size_t kMaxPuzzleNumbers = 6;
constexpr int kMaxPuzzleNumber = 1'000'000;

void CheckRange(const char* name, int32_t value, int32_t lo, int32_t hi) {
  if (value < lo || value > hi) {
    Fail("tree-of-thought search: ", name, " must be ", lo, " to ", hi, ", got ", value);
  }
}

// Runs one G or E call and checks that it answered every request.
std::vector<std::string> RunGenerations(const GenerateFn& generate,
                                        const std::vector<GenerationRequest>& requests,
                                        const char* phase, ThoughtPhaseStats* stats) {
  stats->generations = static_cast<int32_t>(requests.size());
  if (requests.empty()) return {};
  Timer timer;
  std::vector<std::string> texts = generate(requests);
  stats->seconds = timer.Seconds();
  if (texts.size() != requests.size()) {
    Fail("tree-of-thought search: the generator returned ", texts.size(), " texts for ",
         requests.size(), " ", phase, " requests");
  }
  return texts;
}

void Accumulate(const ThoughtPhaseStats& step, ThoughtPhaseStats* total) {
  total->generations += step.generations;
  total->seconds += step.seconds;
}

bool IsSolved(const std::vector<Rational>& numbers) {
  return numbers.size() == 1 && numbers[0] == Rational{24, 1};
}

void CheckPuzzle(std::span<const int> puzzle) {
  if (puzzle.size() < kMinPuzzleNumbers || puzzle.size() > kMaxPuzzleNumbers) {
    Fail("tree-of-thought search: a puzzle has ", kMinPuzzleNumbers, " to ", kMaxPuzzleNumbers,
         " numbers, got ", puzzle.size());
  }
  for (int n : puzzle) {
    if (n < 0 || n > kMaxPuzzleNumber) {
      Fail("tree-of-thought search: puzzle number ", n, " out of range (0 to ", kMaxPuzzleNumber,
           ")");
    }
  }
}

// The tree grown so far, and the step that made each node (the root's is unused), which the
// answer's expression is written from.
struct Search {
  const ThoughtSearchSettings& settings;
  const GenerateFn& generate;
  std::vector<ThoughtNode>& nodes;
  std::vector<Game24Step> node_steps;

  ThoughtNode& node(int32_t id) { return nodes[static_cast<std::size_t>(id)]; }
};

void AddRoot(Search& search, std::span<const int> puzzle) {
  ThoughtNode root;
  for (int n : puzzle) root.numbers.push_back({n, 1});
  std::sort(root.numbers.begin(), root.numbers.end());
  root.kept = true;
  root.solved = IsSolved(root.numbers);
  search.nodes.push_back(std::move(root));
  search.node_steps.resize(1);
}

// G: `thoughts` propose generations per state, one call for all of them.
std::vector<std::string> Propose(Search& search, const std::vector<int32_t>& states, int32_t t,
                                 ThoughtStepStats* stats) {
  const ThoughtSearchSettings& settings = search.settings;
  std::vector<GenerationRequest> requests;
  for (std::size_t i = 0; i < states.size(); ++i) {
    const std::string prompt = Game24ProposePrompt(search.node(states[i]).numbers);
    const auto first = static_cast<int32_t>(requests.size());
    for (int32_t j = 0; j < settings.thoughts; ++j) {
      requests.push_back({.prompt = prompt,
                          .sequence = ThoughtSequenceKey(settings.seed, ThoughtPhase::kGenerate, t,
                                                         static_cast<int64_t>(i), j),
                          .max_tokens = settings.propose_max_tokens,
                          .shares_prompt_with = j == 0 ? -1 : first});
    }
  }
  return RunGenerations(search.generate, requests, "propose", &stats->generate);
}

// The states one proposal text reaches from `parent` (sample j of step t), added to the tree;
// `reached` holds the states this parent reached already, which are not added twice.
void AddProposedStates(Search& search, int32_t parent, int32_t t, int32_t j,
                       const std::string& text, std::map<std::vector<Rational>, int32_t>& reached,
                       std::vector<int32_t>* candidates, ThoughtStepStats* stats) {
  for (const Game24Step& written : ParseGame24Steps(text)) {
    ++stats->parsed_steps;
    const std::optional<Game24Step> taken =
        Game24TakeStep(search.node(parent).numbers, written, search.settings.arithmetic);
    if (!taken) {
      ++stats->inconsistent;
      continue;
    }
    const Game24Step& step = *taken;
    if (reached.count(step.left)) {
      ++stats->duplicates;
      continue;
    }
    ThoughtNode node;
    node.id = static_cast<int32_t>(search.nodes.size());
    node.parent = parent;
    node.depth = t;
    node.sample = j;
    node.step = FormatGame24Step(step);
    node.numbers = step.left;
    node.solved = IsSolved(node.numbers);
    reached.emplace(node.numbers, node.id);
    candidates->push_back(node.id);
    search.nodes.push_back(std::move(node));
    search.node_steps.push_back(step);
  }
}

// S'_t: the consistent steps, once per parent and resulting state, in generation order.
std::vector<int32_t> Candidates(Search& search, const std::vector<int32_t>& states,
                                const std::vector<std::string>& proposals, int32_t t,
                                ThoughtStepStats* stats) {
  const auto thoughts = static_cast<std::size_t>(search.settings.thoughts);
  std::vector<int32_t> candidates;
  for (std::size_t i = 0; i < states.size(); ++i) {
    const int32_t parent = states[i];
    std::map<std::vector<Rational>, int32_t> reached;  // numbers -> node, for this parent
    for (std::size_t j = 0; j < thoughts; ++j) {
      const std::string& text = proposals[i * thoughts + j];
      search.node(parent).proposals.push_back(text);
      AddProposedStates(search, parent, t, static_cast<int32_t>(j), text, reached, &candidates,
                        stats);
    }
  }
  stats->candidates = static_cast<int32_t>(candidates.size());
  return candidates;
}

// E: one value generation per candidate with two or more numbers, one call for all of them; a
// candidate with one number left is sure or impossible as it stands.
void Evaluate(Search& search, const std::vector<int32_t>& candidates, int32_t t,
              ThoughtStepStats* stats) {
  std::vector<GenerationRequest> requests;
  std::vector<int32_t> valued;  // the candidates behind `requests`
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    ThoughtNode& node = search.node(candidates[c]);
    if (node.numbers.size() == 1) {
      node.label = node.solved ? Game24Label::kSure : Game24Label::kImpossible;
      node.value = ThoughtValue(node.label);
      continue;
    }
    requests.push_back(
        {.prompt = Game24ValuePrompt(node.numbers),
         .sequence = ThoughtSequenceKey(search.settings.seed, ThoughtPhase::kEvaluate, t,
                                        static_cast<int64_t>(c), 0),
         .max_tokens = search.settings.value_max_tokens});
    valued.push_back(node.id);
  }
  const std::vector<std::string> values =
      RunGenerations(search.generate, requests, "value", &stats->evaluate);
  for (std::size_t k = 0; k < valued.size(); ++k) {
    ThoughtNode& node = search.node(valued[k]);
    node.value_text = values[k];
    node.value_generated = true;
    node.label = ParseGame24Label(values[k]);
    node.value = ThoughtValue(node.label);
  }
}

// S_t: the `breadth` best candidates; equal values keep generation order.
std::vector<int32_t> KeepBest(Search& search, std::vector<int32_t> candidates,
                              ThoughtStepStats* stats) {
  std::stable_sort(candidates.begin(), candidates.end(), [&](int32_t x, int32_t y) {
    return search.node(x).value > search.node(y).value;
  });
  if (candidates.size() > static_cast<std::size_t>(search.settings.breadth)) {
    candidates.resize(static_cast<std::size_t>(search.settings.breadth));
  }
  for (int32_t id : candidates) search.node(id).kept = true;
  stats->kept = static_cast<int32_t>(candidates.size());
  return candidates;
}

// The answer: the best state of the last kept set that is exactly {24}, and its expression.
void TakeAnswer(Search& search, const std::vector<int32_t>& frontier, std::span<const int> puzzle,
                ThoughtSearchResult* result) {
  for (int32_t id : frontier) {
    if (search.node(id).solved) {
      result->tree.answer = id;
      break;
    }
  }
  std::vector<Game24Step> path;
  for (int32_t id : result->tree.AnswerPath()) {
    ThoughtNode& node = search.node(id);
    node.on_answer_path = true;
    if (node.parent >= 0) path.push_back(search.node_steps[static_cast<std::size_t>(id)]);
  }
  if (result->tree.answer >= 0) {
    result->answer = Game24Expression(puzzle, path);
    result->correct = Game24CheckAnswer(puzzle, result->answer);
  }
}

}  // namespace

void ValidateThoughtSearchSettings(const ThoughtSearchSettings& settings) {
  CheckRange("thoughts", settings.thoughts, 1, kMaxThoughts);
  CheckRange("breadth", settings.breadth, 1, kMaxBreadth);
  CheckRange("steps", settings.steps, 1, kMaxSteps);
  CheckRange("propose_max_tokens", settings.propose_max_tokens, 1, kMaxTokens);
  CheckRange("value_max_tokens", settings.value_max_tokens, 1, kMaxTokens);
}

double ThoughtValue(std::optional<Game24Label> label) {
  if (!label) return kThoughtValueImpossible;
  switch (*label) {
    case Game24Label::kSure:
      return kThoughtValueSure;
    case Game24Label::kLikely:
      return kThoughtValueLikely;
    case Game24Label::kImpossible:
      return kThoughtValueImpossible;
  }
  return kThoughtValueImpossible;
}

ThoughtSearchResult SolveGame24WithThoughts(std::span<const int> puzzle,
                                            const ThoughtSearchSettings& settings,
                                            const GenerateFn& generate) {
  ValidateThoughtSearchSettings(settings);
  CheckPuzzle(puzzle);
  Timer total_timer;
  ThoughtSearchResult result;
  Search search{settings, generate, result.tree.nodes, {}};
  AddRoot(search, puzzle);
  std::vector<int32_t> frontier = {0};  // S_{t-1}, best first
  for (int32_t t = 1; t <= settings.steps; ++t) {
    std::vector<int32_t> states;  // the states of the frontier that can be expanded
    for (int32_t id : frontier) {
      if (search.node(id).numbers.size() >= 2) states.push_back(id);
    }
    if (states.empty()) break;
    ThoughtStepStats stats;
    stats.step = t;
    stats.states = static_cast<int32_t>(states.size());
    const std::vector<std::string> proposals = Propose(search, states, t, &stats);
    std::vector<int32_t> candidates = Candidates(search, states, proposals, t, &stats);
    Evaluate(search, candidates, t, &stats);
    frontier = KeepBest(search, std::move(candidates), &stats);
    Accumulate(stats.generate, &result.generate);
    Accumulate(stats.evaluate, &result.evaluate);
    result.steps.push_back(stats);
    if (frontier.empty()) break;
  }
  TakeAnswer(search, frontier, puzzle, &result);
  result.seconds = total_timer.Seconds();
  return result;
}

}  // namespace grove
