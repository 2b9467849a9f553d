// tests/conformance/footprint.h — what a host process holds of the kernel's resources: its
// memory mappings (lines of /proc/self/maps) and open descriptors (entries of /proc/self/fd),
// for tests that a provider gives back everything it takes.
#pragma once

#include <dirent.h>

#include <cstddef>
#include <fstream>
#include <string>

namespace test {

struct Footprint {
  std::size_t mappings = 0;
  std::size_t descriptors = 0;

  static Footprint now() {
    Footprint f;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) ++f.mappings;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
      while (const dirent* entry = ::readdir(dir))
        if (entry->d_name[0] != '.') ++f.descriptors;
      ::closedir(dir);
      --f.descriptors;  // the one opendir holds
    }
    return f;
  }
};

}  // namespace test
