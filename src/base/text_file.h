// Reading a whole small input file (JSON, prompts, a corpus part) with the checks every such read
// needs: the path must be a regular file (a directory would fail mid-read with a stream exception,
// and a FIFO would block the process forever), and each failure names the file and its role. And
// writing one so that no reader ever sees half of it and nothing but the file itself is replaced.
#pragma once

#include <string>
#include <string_view>

namespace grove {

// The bytes of the regular file `path`; fails (grove::Error) with `what` and the path otherwise.
std::string ReadTextFile(const std::string& path, std::string_view what);

// Writes `text` to a new file of a unique name beside `path` (created exclusively, mode 0644 less
// the umask: no existing file or link is followed or overwritten), then renames it over `path`.
// Fails (grove::Error) with `what` and the path, leaving no temporary file behind.
void ReplaceTextFile(const std::string& path, std::string_view text, std::string_view what);

}  // namespace grove
