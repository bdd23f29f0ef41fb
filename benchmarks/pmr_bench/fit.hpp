// SPDX-License-Identifier: MIT
/// @file fit.hpp
/// The throughput model of 002 fitted to measurements: t(M) = t0 + M / B.
#pragma once

#include <cstddef>
#include <vector>

namespace pmr_bench {

/// One measured point: `bytes` moved in `seconds`.
struct TimePoint {
    double bytes;
    double seconds;
};

/// t(M) = t0 + M / B. The throughput M / t(M) approaches the peak B for large M and reaches B / 2
/// at the half-performance length M1/2 = t0 * B.
struct ThroughputFit {
    bool valid = false;      ///< false with fewer than two distinct sizes or a non-positive slope
    double t0 = 0;           ///< start-up latency [s]
    double bandwidth = 0;    ///< peak bandwidth B [bytes/s]
    double half_length = 0;  ///< M1/2 = t0 * B [bytes]
    double rms_residual = 0; ///< root mean square of (t_measured - t_fit) / t_measured
    double max_residual = 0; ///< largest |t_measured - t_fit| / t_measured
    std::size_t points = 0;
};

/// Least-squares fit of t0 and 1/B, weighted by 1/t^2, i.e. minimising the *relative* residuals.
/// An unweighted fit over sizes from 8 B to 16 MiB would be decided by the largest sizes alone and
/// could give a negative t0; relative residuals let every size count alike, as the log-log plots
/// do. Points with a non-positive time are ignored.
ThroughputFit fit_throughput(const std::vector<TimePoint>& points);

/// Time the fit predicts for `bytes`.
double predicted_seconds(const ThroughputFit& fit, double bytes);

} // namespace pmr_bench
