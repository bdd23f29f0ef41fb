// SPDX-License-Identifier: MIT
#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pmr_bench {

double quantile_sorted(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) {
        return 0;
    }
    double position = q * static_cast<double>(sorted.size() - 1);
    auto below = static_cast<std::size_t>(std::floor(position));
    std::size_t above = std::min(below + 1, sorted.size() - 1);
    double weight = position - static_cast<double>(below);
    return sorted[below] + weight * (sorted[above] - sorted[below]);
}

Summary summarize(std::vector<double> samples) {
    Summary s;
    if (samples.empty()) {
        return s;
    }
    std::sort(samples.begin(), samples.end());
    s.count = samples.size();
    s.min = samples.front();
    s.max = samples.back();
    s.p25 = quantile_sorted(samples, 0.25);
    s.median = quantile_sorted(samples, 0.5);
    s.p75 = quantile_sorted(samples, 0.75);
    s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.count);
    for (auto& x : samples) {
        x = std::fabs(x - s.median);
    }
    std::sort(samples.begin(), samples.end());
    s.mad = quantile_sorted(samples, 0.5);
    return s;
}

} // namespace pmr_bench
