#include "runtime/sim/fleet_simulation.hpp"

#include "actors/agent/xid/xid_catalog.hpp"
#include "runtime/sim/fleet_world.hpp"

namespace vigil::demo {

expected<fleet_result> simulate_fleet(const fleet_options& options,
                                      const agent::xid_catalog& catalog) {
  if (auto valid = fleet_sim::validate(options, catalog); !valid)
    return valid.error();
  const auto trace = fleet_sim::make_trace(options);
  fleet_result result;
  result.trace = fleet_sim::summarise(options, trace, catalog);
  {
    fleet_sim::fleet_world world(options, trace, catalog, result.vigil);
    world.run(*fleet_sim::make_vigil_policy(world));
  }
  {
    fleet_sim::fleet_world world(options, trace, catalog, result.baseline);
    world.run(*fleet_sim::make_baseline_policy(world));
  }
  return result;
}

} // namespace vigil::demo
