#include "train/corpus_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/replacing_file.h"
#include "base/text_file.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

void WriteFileAtomically(const fs::path& path, std::string_view text) {
  ReplaceTextFile(path.string(), text, "corpus file");
}

// A part being written (base/replacing_file.h: a unique temporary beside it until Finish).
class PartialFile {
 public:
  explicit PartialFile(const fs::path& path) : file_(path.string(), "corpus file") {}
  void Append(std::string_view doc) {
    if (!empty_) file_.Write("\n");  // the empty line between documents
    file_.Write(doc);
    empty_ = false;
  }
  void Finish() { file_.Commit(); }

 private:
  ReplacingFile file_;
  bool empty_ = true;
};

void CreateCorpusDirectory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) Fail("corpus: cannot create directory '", dir, "': ", ec.message());
  if (!fs::is_directory(dir)) Fail("corpus: '", dir, "' exists and is not a directory");
}

}  // namespace

CorpusStats WriteCorpus(const CorpusOptions& options, const std::string& dir) {
  // A directory this call creates goes again if it fails (the parts' destructors run first).
  struct RemoveCreatedOnFailure {
    fs::path dir;
    bool created = false, done = false;
    ~RemoveCreatedOnFailure() {
      std::error_code ec;
      if (created && !done) fs::remove(dir, ec);  // only if empty
    }
  } created_dir{.dir = dir, .created = !fs::exists(dir)};
  CreateCorpusDirectory(dir);
  PartialFile train(fs::path(dir) / kCorpusTrainFile), valid(fs::path(dir) / kCorpusValidFile);
  const CorpusStats stats =
      GenerateCorpusDocuments(options, [&train, &valid](bool is_valid, std::string_view doc) {
        (is_valid ? valid : train).Append(doc);
      });
  if (stats.valid.total_documents() == 0) {
    Fail("corpus: ", options.target_words, " words make ", stats.train.total_documents(),
         " documents, and the validation part is every ", options.valid_every,
         "th document: it would be empty; ask for more words");
  }
  train.Finish();
  valid.Finish();
  created_dir.done = true;
  return stats;
}

void WriteCorpusFiles(const Corpus& corpus, const std::string& dir) {
  CreateCorpusDirectory(dir);
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
  std::string s = ReadTextFile(path.string(), "corpus file");
  if (s.empty()) Fail("corpus: '", path.string(), "' is empty");
  return s;
}

std::vector<std::string_view> SplitDocuments(std::string_view text) {
  std::vector<std::string_view> docs;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find("\n\n", pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    docs.push_back(text.substr(pos, end - pos));
    pos = end;
    while (pos < text.size() && text[pos] == '\n') ++pos;
  }
  return docs;
}

}  // namespace grove
