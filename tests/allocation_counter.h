// Counts heap allocations while armed, for the tests that the token loop does not allocate
// (MatMul, a speculative step). A test binary that uses it links the replacement operator new in
// allocation_counter.cc; counting is off until an AllocationCounter is constructed.
#pragma once

#include <cstdint>

namespace grove::testing {

class AllocationCounter {
 public:
  AllocationCounter();   // arms counting from zero
  ~AllocationCounter();  // disarms
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  // Allocations since construction.
  int64_t count() const;
};

}  // namespace grove::testing
