// Which build of grove is running: the GNU build ID the linker wrote into the executable (a hash of
// its contents), so that what one build derived and kept (packed weights) is not trusted by
// another.
#pragma once

#include <string>

namespace grove {

// The running executable's build ID in hex; "" when it has none (linked with --build-id=none).
const std::string& ExecutableBuildId();

}  // namespace grove
