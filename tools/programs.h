// tools/programs.h — the programs `aperture` runs for its subcommands: the demo (aperture-demo)
// and the bench (aperture-bench).
//
// They are installed beside it, in <prefix>/libexec/aperture/, and the build tree lays them out
// the same way (<build>/libexec/aperture/), so `aperture` finds them from where it lies itself.
// Keeping them apart keeps `aperture` itself small: only the bench links the collectives, MPI
// and NCCL.
#pragma once

#include <string>
#include <vector>

namespace aperture::cli {

// The path of program `name`; throws std::runtime_error saying where it looked and how to build it.
std::string find_program(const std::string& name);

// Becomes `path` (execv: same process, same environment), with argv[0] `name`. Returns only when
// that failed, after saying why on stderr, with 126.
int exec_program(const std::string& path, const std::string& name, const std::vector<std::string>& args);

}  // namespace aperture::cli
