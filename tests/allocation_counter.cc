#include "allocation_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

// Every plain form of new and delete is replaced, so that none pairs this malloc with another
// allocator's free (AddressSanitizer checks). noinline: inlined into library code, malloc/free
// pairs trip GCC's -Wmismatched-new-delete.
__attribute__((noinline)) void* operator new(std::size_t n) {
  if (g_count_allocations.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
__attribute__((noinline)) void* operator new[](std::size_t n) { return ::operator new(n); }
__attribute__((noinline)) void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_count_allocations.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  return std::malloc(n == 0 ? 1 : n);
}
__attribute__((noinline)) void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept {
  return ::operator new(n, tag);
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace grove::testing {

AllocationCounter::AllocationCounter() {
  g_allocations = 0;
  g_count_allocations = true;
}

AllocationCounter::~AllocationCounter() { g_count_allocations = false; }

int64_t AllocationCounter::count() const { return g_allocations.load(); }

}  // namespace grove::testing
