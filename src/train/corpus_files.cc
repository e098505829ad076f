#include "train/corpus_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/text_file.h"

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

// A part being written to DIR/<file>.partial.
class PartialFile {
 public:
  explicit PartialFile(fs::path path)
      : path_(std::move(path)), partial_(path_.string() + ".partial") {
    out_.open(partial_, std::ios::binary | std::ios::trunc);
    if (!out_) Fail("corpus: cannot write '", partial_.string(), "': ", std::strerror(errno));
  }
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;
  ~PartialFile() {
    if (!done_) {
      out_.close();
      std::error_code ec;
      fs::remove(partial_, ec);
    }
  }
  void Append(std::string_view doc) {
    if (!empty_) out_.put('\n');  // the empty line between documents
    out_.write(doc.data(), static_cast<std::streamsize>(doc.size()));
    empty_ = false;
    if (!out_) Fail("corpus: writing '", partial_.string(), "' failed: ", std::strerror(errno));
  }
  void Finish() {
    out_.close();
    if (!out_) Fail("corpus: writing '", partial_.string(), "' failed: ", std::strerror(errno));
    std::error_code ec;
    fs::rename(partial_, path_, ec);
    if (ec) {
      Fail("corpus: cannot rename '", partial_.string(), "' to '", path_.string(),
           "': ", ec.message());
    }
    done_ = true;
  }

 private:
  fs::path path_, partial_;
  std::ofstream out_;
  bool empty_ = true;
  bool done_ = false;
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
