// SPDX-License-Identifier: MIT
#include "allreduce_model.hpp"

#include <algorithm>
#include <cmath>

namespace pmr_bench {

double step_seconds(const TofuNetwork& net, double bytes, int rails) {
    if (bytes <= 0 || rails <= 0) {
        return 0;
    }
    const double wire =
        std::max(bytes / net.link_bandwidth, rails * bytes / net.injection_bandwidth);
    return net.time_scale * (net.latency + wire);
}

double recursive_doubling_seconds(const TofuNetwork& net, int ranks, double bytes) {
    int pow2 = 1;
    int rounds = 0;
    while (pow2 * 2 <= ranks) {
        pow2 *= 2;
        ++rounds;
    }
    const int folds = ranks > pow2 ? 2 : 0; // fold in, result back out
    return (rounds + folds) * step_seconds(net, bytes, 1);
}

double ring_seconds(const TofuNetwork& net, int ranks, double bytes) {
    if (ranks < 2) {
        return 0;
    }
    return 2.0 * (ranks - 1) * step_seconds(net, std::ceil(bytes / ranks), 1);
}

double trinaryx3_seconds(const TofuNetwork& net, const std::array<int, 3>& extents, double bytes) {
    // Piece of each part before each reduce-scatter phase, and that phase's extent.
    double seconds = 0;
    std::array<double, 3> piece{};
    piece.fill(bytes / 3);
    for (int phase = 0; phase < 3; ++phase) {
        std::array<int, 3> n{};
        int steps = 0;
        for (int part = 0; part < 3; ++part) {
            n[static_cast<std::size_t>(part)] =
                extents[static_cast<std::size_t>((part + phase) % 3)];
            steps = std::max(steps, n[static_cast<std::size_t>(part)] - 1);
        }
        for (int s = 0; s < steps; ++s) {
            int rails = 0;
            double largest = 0;
            for (std::size_t part = 0; part < 3; ++part) {
                if (s + 1 < n[part]) {
                    ++rails;
                    largest = std::max(largest, std::ceil(piece[part] / n[part]));
                }
            }
            // The allgather phase over the same dimension moves the same chunks back.
            seconds += 2 * step_seconds(net, largest, rails);
        }
        for (std::size_t part = 0; part < 3; ++part) {
            piece[part] /= n[part];
        }
    }
    return seconds;
}

} // namespace pmr_bench
