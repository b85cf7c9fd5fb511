// The heap's free memory: how much of it the allocator holds, and handing it
// back to the system.
//
// glibc keeps what a burst freed in its arenas (one per thread that
// allocates, so up to one per CAF worker): a journal backlog, a rebuild from
// the journal after a shard handover, a Node list. The process's RSS then
// stays at the burst's peak. On the 16-core machine of session 32 three
// replicas held 930 MiB before a SIGKILL and 4.5 GB after the handover and
// the killed replica's return (BENCHMARKS.md, "1 vs 3 replicas at 100,000
// nodes on 16 cores"); malloc_trim on a replica after such a handover took
// its RSS from 166 to 74 MB.
#pragma once

#include <algorithm>
#include <cstddef>

#include <malloc.h>

namespace vigil {

/// What the allocator holds: free (in its arenas, not yet returned) and in use.
struct heap_figures {
  std::size_t free_bytes = 0;
  std::size_t in_use_bytes = 0;
};

/// glibc's own count (mallinfo2). Under the sanitizers, whose allocator is
/// not glibc's, both are 0.
inline heap_figures read_heap() {
  const auto info = mallinfo2();
  return {info.fordblks, info.uordblks};
}

/// Returns the free pages of every malloc arena to the system (glibc's
/// malloc_trim); true when some were. Under the sanitizers it finds nothing
/// to return.
inline bool release_free_memory() {
  return malloc_trim(0) != 0;
}

/// Free memory worth returning: at least `min_free_bytes`, and at least a
/// quarter of what is in use. A steady process keeps some free memory for
/// its next allocations; trimming that only makes it ask the kernel again.
inline bool worth_releasing(const heap_figures& heap, std::size_t min_free_bytes) {
  return heap.free_bytes >= std::max(min_free_bytes, heap.in_use_bytes / 4);
}

} // namespace vigil
