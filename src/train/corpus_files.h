// The corpus on disk: DIR/train.txt and DIR/valid.txt (format in docs/corpus.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "train/corpus.h"

namespace grove {

inline constexpr std::string_view kCorpusTrainFile = "train.txt";
inline constexpr std::string_view kCorpusValidFile = "valid.txt";

// Creates `dir` if needed and writes both parts, each through a temporary file renamed into place,
// so an interrupted run never leaves a truncated part under its final name. Throws grove::Error
// naming the path when it cannot be written.
void WriteCorpusFiles(const Corpus& corpus, const std::string& dir);

// Generates the corpus of `options` straight into DIR/train.txt and DIR/valid.txt (through their
// temporary files, renamed once both are complete), holding one document in memory at a time.
// Fails, writing nothing, when the validation part would be empty (fewer documents than
// options.valid_every): `grove train` cannot use such a corpus.
CorpusStats WriteCorpus(const CorpusOptions& options, const std::string& dir);

// Reads DIR/<file>. Throws grove::Error when the directory is missing or not a directory, or the
// file is missing, unreadable or empty.
std::string ReadCorpusFile(const std::string& dir, std::string_view file);

// The documents of a corpus part: runs of text separated by one or more blank lines, each keeping
// its last newline (the separator's first). Views into `text`; empty documents are skipped.
std::vector<std::string_view> SplitDocuments(std::string_view text);

}  // namespace grove
