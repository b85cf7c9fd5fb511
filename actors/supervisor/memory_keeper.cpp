#include "actors/supervisor/memory_keeper.hpp"

#include <caf/all.hpp>

#include "runtime/logging.hpp"

namespace vigil {

namespace {

double mib(std::size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

void check(memory_keeper_actor* self) {
  auto& st = self->state;
  const auto heap = st.probe.read();
  if (worth_releasing(heap, st.config.min_free_bytes)) {
    const bool returned = st.probe.release();
    component_logger("memory")->info(
      "{:.0f} MiB of the heap free ({:.0f} MiB in use): {}", mib(heap.free_bytes),
      mib(heap.in_use_bytes),
      returned ? "returned to the system" : "checked, none to return");
  }
  self->delayed_send(self, st.config.interval, memory_check_atom::value);
}

} // namespace

caf::behavior memory_keeper(memory_keeper_actor* self, memory_keeper_config config,
                            memory_keeper_probe probe) {
  self->state.config = config;
  self->state.probe = std::move(probe);
  self->delayed_send(self, config.interval, memory_check_atom::value);
  return {
    [=](memory_check_atom) { check(self); },
  };
}

} // namespace vigil
