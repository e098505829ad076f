#include "serve/traffic_record.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/log.h"

namespace grove::serve {

namespace {

// Opens `path` for appending; whether it holds nothing yet.
bool OpenForAppend(std::ofstream& out, const std::filesystem::path& path) {
  std::error_code ec;
  const bool empty =
      !std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0;
  out.open(path, std::ios::app | std::ios::binary);
  if (!out) Fail("--record: cannot open ", path.string(), " for appending: ", std::strerror(errno));
  return empty;
}

}  // namespace

TrafficRecord::TrafficRecord(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) Fail("--record: cannot create the directory ", dir, ": ", ec.message());
  train_empty_ = OpenForAppend(train_, std::filesystem::path(dir) / "train.txt");
  valid_empty_ = OpenForAppend(valid_, std::filesystem::path(dir) / "valid.txt");
}

std::string TrafficRecord::Document(std::string_view prompt, std::string_view output) {
  std::string text(prompt);
  text += output;
  std::string doc;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      doc += line;
      doc += '\n';
    }
    start = end + 1;
  }
  return doc;
}

void TrafficRecord::Add(std::string_view prompt, std::string_view output) {
  const std::string doc = Document(prompt, output);
  if (doc.empty()) return;
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  // The corpus split: document i goes to valid.txt when i % 20 == 19.
  const bool valid = documents_ % 20 == 19;
  std::ofstream& out = valid ? valid_ : train_;
  bool& empty = valid ? valid_empty_ : train_empty_;
  if (!empty) out << '\n';
  out << doc;
  out.flush();
  if (!out) {
    stopped_ = true;
    Log(LogLevel::kWarn, "serve: --record stopped: writing ", dir_, "/",
        valid ? "valid.txt" : "train.txt", " failed: ", std::strerror(errno),
        "; requests go on being answered");
    return;
  }
  empty = false;
  ++documents_;
}

int64_t TrafficRecord::documents() const {
  std::lock_guard lock(mutex_);
  return documents_;
}

bool TrafficRecord::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

}  // namespace grove::serve
