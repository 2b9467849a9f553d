// tests/multirank/world.h — the Team every multi-rank test shares.
//
// These tests run under a launcher (`aperture launch -n N`, or `aperture launch --mpi -n N`);
// every rank runs every test in the same order, so the collective calls inside match up.
#pragma once

#include <aperture/aperture.h>

#include <string>

#include "../common/error_of.h"  // test::error_of, test::contains

namespace test {

aperture::Team& world();

// The value rank `rank` writes at element `i`: distinct per rank and per element, so a wrong
// peer or a wrong offset gives a wrong value.
template <class T>
T pattern(int rank, std::size_t i, int salt = 0) {
  return static_cast<T>((rank + 1) * 100000 + static_cast<long long>(i % 50000) + salt * 7);
}

}  // namespace test
