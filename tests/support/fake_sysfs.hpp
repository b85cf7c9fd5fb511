// The NIC monitor tests' sysfs trees: the ones the demo's simulated hosts write.
#pragma once

#include "runtime/sim/sysfs_tree.hpp"

namespace vigil::test {

using demo::fake_nic;
using demo::fake_port;
using demo::fake_sysfs;
using demo::ib_port_state;
using demo::roce_port;
using demo::route_table_with_default;
using demo::temp_dir;

} // namespace vigil::test
