// An allocator for tables of hundreds of megabytes that are written once, such as a large
// machine's routes (RouteTable: 500 MB at 4,096 devices). On Linux their blocks are aligned to
// 2 MiB and advised into transparent huge pages, which the kernel grants under its default
// `madvise` policy: touching 500 MB in 4 KiB pages took 1.35 s on a 2-core VM, in 2 MiB pages
// 0.05 s. Blocks under 2 MiB come from plain operator new; other systems get the alignment
// without the advice.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

namespace placelab {

namespace detail {
// Blocks of 2 MiB and more are 2 MiB aligned and advised; the size alone decides, so a block is
// freed the way it was allocated.
void* allocate_large(std::size_t bytes);
void deallocate_large(void* p, std::size_t bytes) noexcept;
}  // namespace detail

template <class T>
struct LargeTableAllocator {
  using value_type = T;
  LargeTableAllocator() = default;
  template <class U>
  LargeTableAllocator(const LargeTableAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::allocate_large(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::deallocate_large(p, n * sizeof(T)); }

  // resize() leaves new elements of trivial types unwritten: their writer fills them (zeroing
  // them first was a serial pass over the whole table).
  template <class U>
  void construct(U* p) noexcept(noexcept(U())) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <class U>
  bool operator==(const LargeTableAllocator<U>&) const noexcept { return true; }
};

}  // namespace placelab
