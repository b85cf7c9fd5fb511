// The `vigil` binary: everything happens in run_cli.
#include <iostream>

#include "runtime/cli/cli.hpp"

int main(int argc, char** argv) {
  return vigil::run_cli({argv + 1, argv + argc}, std::cout, std::cerr);
}
