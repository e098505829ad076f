#include "base/user_cache_directory.h"

#include <cstdlib>

namespace grove {

std::string UserCacheDirectory() {
  if (const char* dir = std::getenv("GROVE_CACHE_DIR")) return dir;  // "" turns caching off
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/grove";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/grove";
  return "";
}

}  // namespace grove
