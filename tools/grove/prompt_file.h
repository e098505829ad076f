// Prompt files for calibrate and bench --spec: prompts separated by blank lines, so one prompt may
// span several lines.
#pragma once

#include <string>
#include <vector>

namespace grove::cli {

// Throws grove::Error if the file cannot be read or holds no prompt.
std::vector<std::string> ReadPromptFile(const std::string& path);

}  // namespace grove::cli
