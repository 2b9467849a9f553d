// src/providers/provider_common.h — what every provider's set-up needs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "aperture/team.h"

namespace aperture::detail {

// A size from environment variable `variable`: bytes with an optional K, M, G or T suffix
// (powers of 1024), at least 1 and at most 16T; `fallback` when unset. Throws aperture::Error
// naming the variable and its value otherwise.
std::size_t size_from_env(const char* variable, std::size_t fallback);

// Collective. Every rank learns whether any rank failed `step` (its `local_error` is not empty),
// so all of them throw together instead of some waiting forever in the next collective call.
// The failing rank's error carries its message; the others name the rank that failed.
void agree_or_throw(Team& team, std::string_view who, std::string_view step, const std::string& local_error);

}  // namespace aperture::detail
