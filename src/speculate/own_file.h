// The files this layer keeps for itself (the suffix store, speculate/suffix_store.h; the verify
// cost cache, verify_cost_cache.h) replace only a file of their own kind. A finished file is
// renamed over its path (base/replacing_file.h), which replaces whatever is there: a draft model
// named by mistake (`serve --suffix-store DRAFT.gguf` made the draft 24 bytes), a symbolic link
// (the link itself, where its target was meant), a FIFO or a device node. The tools check the
// files users name as outputs before any work starts (tools/grove/output_path.h); these checks are
// the library's own, made when it writes, which for the suffix store is at a server's exit.
#pragma once

#include <string>
#include <string_view>

namespace grove {

// What is at a path a writer of one kind of file would replace.
enum class OwnFileState {
  kAbsent,      // nothing: a new file is made
  kOwn,         // a regular file whose first bytes are the kind's magic (or any, without one)
  kForeign,     // a regular file that does not begin with the magic
  kLink,        // a symbolic link (never followed: the link itself would be replaced)
  kNotRegular,  // a directory, FIFO, socket or device node
};

// Looks at `path` without following a link or blocking on a FIFO. `magic` empty: every regular
// file is one of the kind's.
OwnFileState InspectOwnFile(const std::string& path, std::string_view magic);

// Fails (grove::Error naming `what`, the path and what is there) unless `path` is absent or one of
// the kind's files (InspectOwnFile), so that a writer leaves any other file as it is.
void CheckReplaceableOwnFile(const std::string& path, std::string_view what,
                             std::string_view magic);

}  // namespace grove
