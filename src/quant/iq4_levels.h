// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl), a fact of both formats: a 4-bit index
// selects one, and the value is level * scale. Shared by the 32-block and 256-block code.
#pragma once

#include <cstdint>

namespace grove {

inline constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace grove
