// What `grove serve --record DIR` keeps (opt-in): every finished choice's prompt and output as one
// document of a corpus directory (docs/corpus.md: DIR/train.txt and DIR/valid.txt, documents
// separated by one empty line, every 20th document to valid.txt), so that `grove train-drafter
// --corpus DIR` fine-tunes a draft on the traffic the server has answered. Files are appended to:
// a server restarted on the same directory goes on recording.
//
// Recording never stops serving: a write that fails (a full disk, the directory removed) logs one
// warning naming the file and the reason, and recording stops; requests go on being answered.
#pragma once

#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>

namespace grove::serve {

class TrafficRecord {
 public:
  // Creates `dir` if missing and opens both files for appending. Throws grove::Error naming the
  // file and the reason when either cannot be opened.
  explicit TrafficRecord(const std::string& dir);

  // Appends one document: the prompt's text and the output's, empty and blank lines left out (a
  // document holds none). Thread-safe; never throws.
  void Add(std::string_view prompt, std::string_view output);

  int64_t documents() const;
  bool stopped() const;

 private:
  static std::string Document(std::string_view prompt, std::string_view output);

  mutable std::mutex mutex_;
  std::string dir_;
  std::ofstream train_, valid_;
  bool train_empty_ = true, valid_empty_ = true;
  int64_t documents_ = 0;
  bool stopped_ = false;
};

}  // namespace grove::serve
