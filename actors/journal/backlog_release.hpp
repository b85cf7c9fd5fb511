// When a journal backlog is over, hand its memory back to the system.
//
// A database outage or slowdown fills the journal's queue (up to
// journal.queue_capacity appends, and the ingest requests that wait on
// them). Once the queue drains, glibc keeps the freed pages in its arenas:
// the control plane's RSS stayed at each outage's peak, 62 → 207 → 229 MiB
// over the issue's 10-minute load run (RELIABILITY.md "The issue's 10-minute
// run"). The rule is here, pure; the journal actor acts on it, with
// runtime/free_memory.hpp's release_free_memory.
#pragma once

#include <algorithm>
#include <cstddef>

namespace vigil {

class backlog_release {
public:
  /// A backlog begins when `high` appends wait at once and is over when no
  /// more than `low` do: a steady load keeps a batch or so waiting, so
  /// "over" cannot mean empty. The gap between the two keeps a queue that
  /// hovers around one mark from releasing again and again.
  backlog_release(std::size_t high, std::size_t low)
    : high_(std::max<std::size_t>(high, 1)), low_(std::min(low, high_ - 1)) {}

  /// The appends waiting now (queued and in flight), as they grow.
  void note(std::size_t waiting) {
    if (waiting >= high_)
      in_backlog_ = true;
  }

  /// The appends waiting now, as they shrink: true once, when a backlog has
  /// just ended.
  bool ended(std::size_t waiting) {
    note(waiting);
    if (!in_backlog_ || waiting > low_)
      return false;
    in_backlog_ = false;
    return true;
  }

private:
  std::size_t high_;
  std::size_t low_;
  bool in_backlog_ = false;
};

} // namespace vigil
