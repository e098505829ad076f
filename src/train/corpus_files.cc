#include "train/corpus_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

void WriteFileAtomically(const fs::path& path, std::string_view text) {
  const fs::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) Fail("corpus: cannot write '", partial.string(), "': ", std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) Fail("corpus: writing '", partial.string(), "' failed: ", std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec)
    Fail("corpus: cannot rename '", partial.string(), "' to '", path.string(), "': ", ec.message());
}

}  // namespace

void WriteCorpusFiles(const Corpus& corpus, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) Fail("corpus: cannot create directory '", dir, "': ", ec.message());
  if (!fs::is_directory(dir)) Fail("corpus: '", dir, "' exists and is not a directory");
  WriteFileAtomically(fs::path(dir) / kCorpusTrainFile, corpus.train);
  WriteFileAtomically(fs::path(dir) / kCorpusValidFile, corpus.valid);
}

std::string ReadCorpusFile(const std::string& dir, std::string_view file) {
  std::error_code ec;
  if (!fs::exists(dir, ec))
    Fail("corpus: directory '", dir, "' does not exist (make one with `grove corpus`)");
  if (!fs::is_directory(dir, ec)) Fail("corpus: '", dir, "' is not a directory");
  const fs::path path = fs::path(dir) / file;
  if (!fs::exists(path, ec))
    Fail("corpus: '", path.string(), "' not found (make a corpus with `grove corpus`)");
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("corpus: cannot read '", path.string(), "': ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) Fail("corpus: reading '", path.string(), "' failed");
  std::string s = std::move(text).str();
  if (s.empty()) Fail("corpus: '", path.string(), "' is empty");
  return s;
}

}  // namespace grove
