// launcher/program_path.h — find the program a launch will run, before any rank is started.
//
// The same search execvp makes (a name with a '/' is used as given, otherwise each PATH entry in
// turn), done up front so that a typo is one clear error instead of N failed ranks.
#pragma once

#include <string>

namespace aperture::launcher {

// The path to exec for `program`; throws UsageError naming the program, what is wrong and the
// fix when it is missing, a directory or not executable.
std::string resolve_program(const std::string& program);

// The absolute path of the running executable (to run itself again, or programs beside it).
std::string self_executable();

}  // namespace aperture::launcher
