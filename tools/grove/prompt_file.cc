#include "prompt_file.h"

#include <sstream>

#include "base/error.h"
#include "base/text_file.h"

namespace grove::cli {

std::vector<std::string> ReadPromptFile(const std::string& path) {
  std::istringstream in(ReadTextFile(path, "prompt file"));
  std::vector<std::string> prompts;
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (!current.empty()) prompts.push_back(current);
      current.clear();
    } else {
      current += current.empty() ? line : "\n" + line;
    }
  }
  if (!current.empty()) prompts.push_back(current);
  if (prompts.empty()) Fail("prompt file '", path, "' holds no prompts");
  return prompts;
}

}  // namespace grove::cli
