// SPDX-License-Identifier: MIT
#include "fit.hpp"

#include <algorithm>
#include <cmath>

namespace pmr_bench {

ThroughputFit fit_throughput(const std::vector<TimePoint>& points) {
    ThroughputFit fit;
    // Normal equations of sum w (t - a - b M)^2 with w = 1/t^2.
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    double smallest = HUGE_VAL, largest = -HUGE_VAL;
    for (const auto& p : points) {
        if (!(p.seconds > 0)) {
            continue;
        }
        double w = 1.0 / (p.seconds * p.seconds);
        sw += w;
        sx += w * p.bytes;
        sy += w * p.seconds;
        sxx += w * p.bytes * p.bytes;
        sxy += w * p.bytes * p.seconds;
        smallest = std::min(smallest, p.bytes);
        largest = std::max(largest, p.bytes);
        ++fit.points;
    }
    double det = sw * sxx - sx * sx;
    if (fit.points < 2 || !(largest > smallest) || !(det > 0)) {
        return fit;
    }
    double t0 = (sxx * sy - sx * sxy) / det;
    double slope = (sw * sxy - sx * sy) / det;
    if (!(slope > 0)) {
        return fit;
    }
    fit.valid = true;
    fit.t0 = t0;
    fit.bandwidth = 1.0 / slope;
    fit.half_length = t0 * fit.bandwidth;
    double sum_sq = 0;
    for (const auto& p : points) {
        if (!(p.seconds > 0)) {
            continue;
        }
        double r = (p.seconds - predicted_seconds(fit, p.bytes)) / p.seconds;
        sum_sq += r * r;
        fit.max_residual = std::max(fit.max_residual, std::fabs(r));
    }
    fit.rms_residual = std::sqrt(sum_sq / static_cast<double>(fit.points));
    return fit;
}

double predicted_seconds(const ThroughputFit& fit, double bytes) {
    return fit.t0 + bytes / fit.bandwidth;
}

} // namespace pmr_bench
