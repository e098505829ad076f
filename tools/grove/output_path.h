// Checks of the files and directories a command will write, made before any work starts, so that
// a bad target fails at once with its reason instead of after minutes of work, and so that no
// command replaces what it should not: a device node, a FIFO or a symlink (renaming a finished
// temporary file over it would replace the node or the link itself), a directory, one of the
// command's own inputs, or a read-only file unless --force is given. An existing writable regular
// file is replaced, as cp and llama-quantize do (re-running a finished `grove train` rewrites its
// --export, for one).
#pragma once

#include <initializer_list>
#include <string>

namespace grove::cli {

struct OutputRules {
  // Files the command reads; the output may be none of them (compared as files, not as names).
  std::initializer_list<std::string> inputs = {};
  // nullptr: the command has no --force and never replaces a read-only file; otherwise the
  // value of its --force flag.
  const bool* force = nullptr;
};

// Fails (grove::Error) unless `path` may be written as a regular file: see the file comment;
// `what` names the option in the message ("-o", "OUT", "--profile-out").
void CheckOutputFile(const std::string& path, const char* what, const OutputRules& rules = {});

// Fails unless `path` is an existing directory or can be created as one (its nearest existing
// ancestor is a writable directory).
void CheckOutputDirectory(const std::string& path, const char* what);

}  // namespace grove::cli
