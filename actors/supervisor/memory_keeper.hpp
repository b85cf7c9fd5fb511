// The memory keeper: every `interval` it reads how much free memory the
// allocator holds (runtime/free_memory.hpp) and hands it back to the system
// when a burst left much of it — a rebuild from the journal after a shard
// handover, a replica's return, a Node list, a journal backlog (the journal
// also releases at once when its backlog ends). The rule is worth_releasing;
// this actor only asks on a timer, so whatever freed the memory, the RSS
// comes back down within one interval.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include <caf/atom.hpp>
#include <caf/behavior.hpp>
#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/free_memory.hpp"

namespace vigil {

using memory_check_atom = caf::atom_constant<caf::atom("memcheck")>;

struct memory_keeper_config {
  std::chrono::milliseconds interval{std::chrono::seconds{30}};
  /// Never trim less than this (worth_releasing).
  std::size_t min_free_bytes = std::size_t{64} << 20;
};

/// Where the figures come from and what a release does: glibc's, or a
/// test's.
struct memory_keeper_probe {
  std::function<heap_figures()> read = read_heap;
  std::function<bool()> release = release_free_memory;
};

struct memory_keeper_state {
  memory_keeper_config config;
  memory_keeper_probe probe;
  static inline const char* name = "memory_keeper";
};

using memory_keeper_actor = caf::stateful_actor<memory_keeper_state>;

caf::behavior memory_keeper(memory_keeper_actor* self, memory_keeper_config config,
                            memory_keeper_probe probe = {});

} // namespace vigil
