// Checks of the files and directories a command will write, made before any work starts, so that
// a bad target fails at once with its reason instead of after minutes of work, and so that no
// command replaces what it should not: a device node, a FIFO or a symlink (renaming a finished
// temporary file over it would replace the node or the link itself), a directory, one of the
// command's own inputs, or a read-only file unless --force is given. An existing writable regular
// file is replaced, as cp and llama-quantize do (re-running a finished `grove train` rewrites its
// --export, for one).
#pragma once

#include <string>
#include <vector>

namespace grove::cli {

struct OutputRules {
  // Files the command reads; the output may be none of them (compared as files, not as names).
  std::vector<std::string> inputs = {};
  // nullptr: the command has no --force and never replaces a read-only file; otherwise the
  // value of its --force flag.
  const bool* force = nullptr;
};

// Fails (grove::Error) unless `path` may be written as a regular file: see the file comment;
// `what` names the option in the message ("-o", "OUT", "--profile-out").
void CheckOutputFile(const std::string& path, const char* what, const OutputRules& rules = {});

// Fails unless `path` is an existing directory or can be created as one (its nearest existing
// ancestor is a writable directory). In one that exists, each of `files` (the names the command
// writes there) must pass CheckOutputFile.
void CheckOutputDirectory(const std::string& path, const char* what,
                          const std::vector<std::string>& files = {},
                          const OutputRules& rules = {});

// The part files of a corpus directory (train/corpus_files.h), which corpus, self-distill and
// serve --record write.
std::vector<std::string> CorpusFiles();

// The files a drafter name stands for ("draft.gguf+suffix": draft.gguf), as inputs for the rules:
// the words ngram and suffix name none, but are harmless among them.
std::vector<std::string> DrafterFiles(const std::string& drafter);

}  // namespace grove::cli
