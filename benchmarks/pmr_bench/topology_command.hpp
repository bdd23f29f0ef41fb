// SPDX-License-Identifier: MIT
/// @file topology_command.hpp
/// `pmr-bench topology`: the virtual 3D torus of the Tofu interconnect mapped onto a 6D shape at
/// full-machine scale, without ranks: hops between virtual neighbours and nodes left out.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pmr_bench {

/// Parses `words` (the options after "topology"), prints the mapping's cost to `out` and returns
/// the exit status. @throws UsageError for a bad command line.
int run_topology_command(const std::vector<std::string>& words, std::ostream& out);

} // namespace pmr_bench
