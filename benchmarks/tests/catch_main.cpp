// SPDX-License-Identifier: MIT
// Catch2's implementation and main() for test_fit_model, compiled on their own without optimisation
// or sanitizers (see benchmarks/CMakeLists.txt): none of it is pmr's code.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
