// Work-arounds for the C++ standard library, run once at a program's start
// before it starts any thread.
#pragma once

namespace vigil {

/// libstdc++ fills std::ctype<char>'s narrow and widen tables lazily, a
/// character at a time on first use, without synchronisation (GCC bug
/// 77704). Two threads compiling their first std::regex at once race on
/// them: ThreadSanitizer reported it in the chaos harness, where every
/// simulated agent's NIC poller compiles its interface patterns on a worker
/// thread. Filled here first, the tables are only read afterwards.
void fill_ctype_tables();

} // namespace vigil
