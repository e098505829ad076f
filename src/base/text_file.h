// Reading a whole small input file (JSON, prompts, a corpus part) with the checks every such read
// needs: the path must be a regular file (a directory would fail mid-read with a stream exception,
// and a FIFO would block the process forever), and each failure names the file and its role.
// (Writing: base/replacing_file.h.)
#pragma once

#include <string>
#include <string_view>

namespace grove {

// The bytes of the regular file `path`; fails (grove::Error) with `what` and the path otherwise.
std::string ReadTextFile(const std::string& path, std::string_view what);

}  // namespace grove
