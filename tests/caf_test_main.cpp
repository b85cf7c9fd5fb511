// The CAF test engine: exactly one translation unit per test binary has it.
#define CAF_TEST_NO_MAIN
#include <caf/test/unit_test_impl.hpp>

#include "runtime/stdlib_workarounds.hpp"

int main(int argc, char** argv) {
  vigil::fill_ctype_tables();
  return caf::test::main(argc, argv);
}
