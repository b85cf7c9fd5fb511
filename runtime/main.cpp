// The `vigil` binary: everything happens in run_cli.
#include <iostream>

#include "runtime/cli/cli.hpp"
#include "runtime/stdlib_workarounds.hpp"

int main(int argc, char** argv) {
  vigil::fill_ctype_tables();
  return vigil::run_cli({argv + 1, argv + argc}, std::cout, std::cerr);
}
