// SPDX-License-Identifier: MIT
/// @file model_command.hpp
/// `pmr-bench model`: the figures the closed formulas of 002 predict, without measuring anything.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pmr_bench {

/// Parses `words` (the options after "model"), prints the prediction to `out` and returns the
/// exit status. @throws UsageError for a bad command line.
int run_model_command(const std::vector<std::string>& words, std::ostream& out);

} // namespace pmr_bench
