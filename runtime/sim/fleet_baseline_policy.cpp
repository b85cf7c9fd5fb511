// The fleet simulation's baseline: every unhealthy signal drains the node
// and reboots it; the (cap + 1)-th reboot within the window is a replace. No
// breaker acts, but a shadow breaker counts how often vigil's would trip.
#include "actors/control/rules/circuit_breaker.hpp"
#include "runtime/sim/fleet_world.hpp"

namespace vigil::demo::fleet_sim {

namespace {

class baseline_policy final : public policy {
public:
  explicit baseline_policy(fleet_world& world)
    : world_(world), nodes_(static_cast<std::size_t>(world.size())),
      shadow_(world.model().breaker) {}

  void on_signal(int node, health_event event) override {
    auto& st = nodes_[node];
    if (event.is_healthy || st.busy)
      return;
    st.busy = true;
    // breakerTrips: would these cordons have tripped vigil's breaker?
    if (shadow_.admit_cordon(world_.name(node), world_.size(), world_.now())
        == control::breaker_refusal::trips_now) {
      ++world_.outcome().breaker_trips;
      shadow_.reset();
    }
    ++world_.outcome().cordons;
    ++world_.outcome().drains;
    world_.take_out(node, whole_node);
    world_.timer(world_.now() + world_.drain_time(node), node, 0, 0);
  }

  void on_timer(const sim_event& t) override {
    auto& st = nodes_[t.node];
    const auto now = world_.now();
    while (!st.reboots.empty()
           && st.reboots.front() <= now - world_.model().baseline_reboot_window)
      st.reboots.pop_front();
    if (static_cast<int>(st.reboots.size()) >= world_.model().baseline_max_reboots)
      return world_.start_action(t.node, action_kind::replace, -1);
    st.reboots.push_back(now);
    world_.start_action(t.node, action_kind::reboot, -1);
  }

  void on_action_done(int node, action_kind kind, int) override {
    auto& st = nodes_[node];
    st.busy = false;
    if (kind == action_kind::replace)
      st.reboots.clear();
    world_.put_back(node);
  }

  bool acting_on(int node) const override { return nodes_[node].busy; }

private:
  struct node_state {
    bool busy = false; ///< draining, rebooting or replacing
    std::deque<wall_time> reboots;
  };

  fleet_world& world_;
  std::vector<node_state> nodes_;
  control::circuit_breaker shadow_;
};

} // namespace

std::unique_ptr<policy> make_baseline_policy(fleet_world& world) {
  return std::make_unique<baseline_policy>(world);
}

} // namespace vigil::demo::fleet_sim
