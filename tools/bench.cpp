// tools/bench.cpp — `aperture bench`: becomes the bench program (bench/, aperture-bench) with the
// same arguments. The bench drives its jobs itself (one per rank count, through the launcher
// component), so its options, output and exit status are `aperture bench`'s.
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "programs.h"

namespace aperture::cli {

int bench_main(int argc, char** argv) {
  std::string program;
  try {
    program = find_program("aperture-bench");
  } catch (const std::exception& e) {
    std::cerr << "aperture bench: " << e.what() << "\n";
    return 1;
  }
  return exec_program(program, "aperture-bench", std::vector<std::string>(argv + 1, argv + argc));
}

}  // namespace aperture::cli
