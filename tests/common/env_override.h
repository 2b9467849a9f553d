// tests/common/env_override.h — an environment variable set for one scope, for tests of how the
// library reads its environment (heap sizes, reserves, timeouts).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace test {

// Sets `name` to `value` for its lifetime, then puts the variable back as it was (unset if it
// was unset), also when a check throws or returns early.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvOverride() { saved_ ? (void)::setenv(name_.c_str(), saved_->c_str(), 1) : (void)::unsetenv(name_.c_str()); }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

}  // namespace test
