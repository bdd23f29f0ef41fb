// SPDX-License-Identifier: MIT
/// @file plot.hpp
/// --plot: bandwidth over message size for every variant, with its fitted model as a dashed line,
/// drawn by gnuplot (found at run time; Debian: apt-get install gnuplot-nox).
#pragma once

#include "report.hpp"

#include <string>

namespace pmr_bench {

/// Full path of gnuplot in PATH, or empty if there is none.
std::string find_gnuplot();

/// What to tell the user when gnuplot is missing.
std::string gnuplot_missing_message();

/// The gnuplot script (data inline) that draws `report` into the PNG file `path`.
std::string plot_script(const Report& report, const std::string& path);

/// Runs `gnuplot` on plot_script(). Returns an error message, empty on success.
std::string plot_report(const Report& report, const std::string& path, const std::string& gnuplot);

} // namespace pmr_bench
