// The vocabulary of the synthetic stories: a core of common English words plus thousands of
// procedurally built, pronounceable words (names, things, verbs, adjectives, towns).
//
// The lexicon is the same for every corpus seed: it is the corpus's "language", and corpora drawn
// with different seeds (a training run and a held-out check, say) should share it. Procedural words
// come from a fixed syllable inventory, so they look like words a tokenizer can learn pieces of
// (onsets, vowels, endings such as -ed, -ing, -s) rather than random letter strings.
#pragma once

#include <string>
#include <vector>

namespace grove {

struct LexiconNoun {
  std::string one;   // "lantern"
  std::string many;  // "lanterns"
};

// A verb that takes an object, in every form the grammar uses.
struct LexiconVerb {
  std::string base;   // "find"
  std::string third;  // "finds"
  std::string past;   // "found"
  std::string ing;    // "finding"
};

struct Lexicon {
  // Names end in a vowel for female and a consonant for male characters, so the pronoun that
  // follows a name is predictable from its spelling.
  std::vector<std::string> female_names;
  std::vector<std::string> male_names;
  std::vector<LexiconNoun> roles;   // "baker", "fisher": what a character is
  std::vector<LexiconNoun> things;  // objects a character can own, lose, find or carry
  std::vector<LexiconNoun> animals;
  std::vector<std::string> locations;  // "garden", "market": "the ___" inside a town
  std::vector<std::string> towns;      // capitalised place names
  std::vector<LexiconVerb> verbs;      // transitive
  std::vector<std::string> adjectives;
  std::vector<std::string> feelings;  // "happy", "afraid": after "was"
  std::vector<std::string> weathers;  // "it was ___"
  std::vector<std::string> foods;

  // Every distinct word form the lexicon can produce (for statistics and tests).
  std::vector<std::string> AllForms() const;
};

// Built once on first use; immutable afterwards.
const Lexicon& StoryLexicon();

}  // namespace grove
