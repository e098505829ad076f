// What --draft takes in every command that speculates with any drafter: the names
// DraftSource::Open knows (speculate/draft_source.h), said once.
#pragma once

#include <string>

namespace grove::cli {

inline const std::string kDraftNames =
    "a draft GGUF (same vocabulary: a draft model, or a feature or parallel drafter), 'ngram' "
    "(prompt lookup) or 'suffix' (suffix drafting from the text and every earlier output of this "
    "process)";

}  // namespace grove::cli
