// Where grove keeps what runs learn about this machine and its models (verify curves, packed
// weights), so that a later run starts with it.
#pragma once

#include <string>

namespace grove {

// $GROVE_CACHE_DIR if set (set and empty: "", no caching), else $XDG_CACHE_HOME/grove, else
// $HOME/.cache/grove, else "". The directory may not exist yet.
std::string UserCacheDirectory();

}  // namespace grove
