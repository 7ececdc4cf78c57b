// Counts every heap allocation of the program that includes this header, so a test or benchmark
// can show that a window of code allocated nothing (the simulator's hot path must not).
// It replaces the global operator new/delete: include it from exactly ONE source file per program.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

namespace placelab::support {
// Allocations since program start; read before and after the window being checked.
inline std::atomic<long> g_allocations{0};
}  // namespace placelab::support

// gcc 12 flags free() inside a replaced operator delete as a new/free mismatch; here the pair
// is malloc/free by construction.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  placelab::support::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The nothrow form (std::stable_sort's temporary buffer uses it) must come from the same malloc
// as the delete below, or AddressSanitizer reports an alloc-dealloc mismatch.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  placelab::support::g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop
