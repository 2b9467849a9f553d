// tools/commands.h — the subcommands of the `aperture` program; each takes argv from its own
// name on and returns the exit code. `launch` is the launcher component's launch_main().
#pragma once

namespace aperture::cli {

int info_main(int argc, char** argv);   // info.cpp
int demo_main(int argc, char** argv);   // demo.cpp: runs examples/demo's program through the launcher
int bench_main(int argc, char** argv);  // bench.cpp: becomes bench/'s program

}  // namespace aperture::cli
