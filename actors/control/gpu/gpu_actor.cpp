#include "actors/control/gpu/gpu_actor.hpp"

#include "actors/protocol/control_messages.hpp"

namespace vigil {

caf::behavior gpu(gpu_actor* self, std::string uuid, control::correlation_config config) {
  self->state.uuid = std::move(uuid);
  self->state.history = control::gpu_xid_history(config);
  return {
    [=](correlate_atom, const health_event& event, std::int64_t at_ns, bool) {
      auto& st = self->state;
      return control::observe_gpu(st.history, st.uuid, event,
                                  wall_time{std::chrono::nanoseconds{at_ns}});
    },
    [=](summary_atom) {
      auto out = self->figures(4);
      out["name"] = "gpu/" + self->state.uuid;
      out["kind"] = "gpu";
      out["uuid"] = self->state.uuid;
      out["xidBursts"] = self->state.history.bursts(); // within the rule's window
      return out.dump();
    },
  };
}

} // namespace vigil
