// Short stories from a probabilistic grammar (see docs/corpus.md for the grammar).
//
// A story has two or three named characters who recur across its sentences (with pronouns that
// agree with them), a few story-level objects and places that recur too, dialogue in quotes, and
// simple causality ("because", "so"). Plot skeletons fix the order of events, so some continuations
// are nearly certain (the name after "Thank you,", the object that was lost), while the slots
// filled from the lexicon are genuinely open.
#pragma once

#include <string>

#include "tasks/corpus_rng.h"

namespace grove {

// One story: sentences separated by spaces, paragraphs by a single newline; ends with a newline
// and never contains an empty line.
std::string GenerateStory(CorpusRng& rng);

}  // namespace grove
