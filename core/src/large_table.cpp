#include "placelab/core/large_table.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace placelab::detail {
namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}  // namespace

void* allocate_large(std::size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes);
  void* p = ::operator new(bytes, std::align_val_t{kHugePage});
#if defined(__linux__)
  // Advice only: where the kernel has no huge pages to give, the block keeps 4 KiB pages.
  (void)::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return p;
}

// Unsized deletes: clang enables sized deallocation only with -fsized-deallocation.
void deallocate_large(void* p, std::size_t bytes) noexcept {
  if (bytes < kHugePage) return ::operator delete(p);
  ::operator delete(p, std::align_val_t{kHugePage});
}

}  // namespace placelab::detail
