// SPDX-License-Identifier: MIT
/// @file stats.hpp
/// Robust summary of repeated timing samples.
#pragma once

#include <cstddef>
#include <vector>

namespace pmr_bench {

/// Order statistics of a sample set. Timings are skewed (noise only ever adds time), so the median
/// is the headline and the spread is given by quartiles and the median absolute deviation.
struct Summary {
    std::size_t count = 0;
    double min = 0;
    double p25 = 0;
    double median = 0;
    double p75 = 0;
    double max = 0;
    double mean = 0;
    double mad = 0; ///< median of |x - median|
};

/// Percentiles use linear interpolation between order statistics. An empty set gives zeros.
Summary summarize(std::vector<double> samples);

/// The `q`-quantile (0..1) of sorted values, linearly interpolated.
double quantile_sorted(const std::vector<double>& sorted, double q);

} // namespace pmr_bench
