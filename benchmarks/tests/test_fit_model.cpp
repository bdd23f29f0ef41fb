// SPDX-License-Identifier: MIT
// Unit tests of pmr-bench's arithmetic: the throughput fit against synthetic data with known B and
// t0, the closed formulas of 002 against its Table 1 with the parameters of its Tables 2, 6 and 7,
// the statistics, the size syntax and the verification pattern. No MPI needed.
#include <catch2/catch.hpp> // main() is in catch_main.cpp

#include "allreduce_model.hpp"
#include "fit.hpp"
#include "model.hpp"
#include "options.hpp"
#include "pattern.hpp"
#include "stats.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

using namespace pmr_bench;

namespace {
std::vector<double> sizes_8_to_16m() {
    std::vector<double> sizes = {0};
    for (double m = 8; m <= 16.0 * 1024 * 1024; m *= 2) {
        sizes.push_back(m);
    }
    return sizes;
}
} // namespace

TEST_CASE("the fit recovers B and t0 from exact data", "[fit]") {
    const double bandwidth = 5.2e9;
    const double t0 = 1.7e-6;
    std::vector<TimePoint> points;
    for (double m : sizes_8_to_16m()) {
        points.push_back({m, t0 + m / bandwidth});
    }
    ThroughputFit fit = fit_throughput(points);
    REQUIRE(fit.valid);
    CHECK(fit.bandwidth == Approx(bandwidth).epsilon(1e-9));
    CHECK(fit.t0 == Approx(t0).epsilon(1e-9));
    CHECK(fit.half_length == Approx(t0 * bandwidth).epsilon(1e-9));
    CHECK(fit.rms_residual < 1e-9);
    CHECK(fit.points == points.size());
}

TEST_CASE("the fit stays close under multiplicative noise", "[fit]") {
    const double bandwidth = 8e9;
    const double t0 = 0.9e-6;
    std::vector<TimePoint> points;
    std::uint64_t state = 12345;
    for (double m : sizes_8_to_16m()) {
        // Deterministic noise of up to +-3 %, as repeated medians show on a quiet machine.
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        double noise = (static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5) * 0.06;
        points.push_back({m, (t0 + m / bandwidth) * (1 + noise)});
    }
    ThroughputFit fit = fit_throughput(points);
    REQUIRE(fit.valid);
    CHECK(fit.bandwidth == Approx(bandwidth).epsilon(0.05));
    CHECK(fit.t0 == Approx(t0).epsilon(0.05));
    CHECK(fit.rms_residual < 0.03);
    CHECK(fit.max_residual < 0.06);
}

TEST_CASE("the fit refuses data without a slope", "[fit]") {
    CHECK_FALSE(fit_throughput({{1024, 1e-6}}).valid);
    CHECK_FALSE(fit_throughput({{8, 1e-6}, {8, 2e-6}}).valid);
    CHECK_FALSE(fit_throughput({{8, 2e-6}, {1024, 1e-6}}).valid);
    CHECK_FALSE(fit_throughput({}).valid);
}

TEST_CASE("ping-pong model matches 002 Table 1 with Tables 2 and 3", "[model]") {
    PingPongParameters p; // B 4500 MB/s, L 1.6 us, control 1.751 + 1.829 + 1.785 us
    ModelFigures f = pingpong_figures(p);
    CHECK(f.bandwidth / 1e6 == Approx(4500));
    CHECK(f.t0 * 1e6 == Approx(6.965).epsilon(1e-4));
    CHECK(f.half_length == Approx(3.134e4).epsilon(1e-3));
    CHECK(pingpong_seconds(p, 0) == Approx(f.t0));
}

TEST_CASE("Allreduce model matches 002 Table 1 with the parameters of Table 6", "[model]") {
    AllreduceParameters p;
    p.np1 = 8;
    p.np2 = 6;
    p.np3 = 8;
    p.bandwidth = 13500e6;
    p.bcast_segment = 16384;
    p.reduce_segment = 16384;
    p.latency = 1.6e-6;
    p.reduction_rate = 4750e6;
    p.t0 = 8.370e-6;
    ModelFigures f = allreduce_figures(p);
    // Table 1, Allreduce 3D/16KiB, estimation: B 6,306 MB/s, M1/2 1.350E+06 B, t0 428.2 us.
    CHECK(f.bandwidth / 1e6 == Approx(6306).epsilon(5e-4));
    CHECK(f.half_length == Approx(1.350e6).epsilon(2e-3));
    CHECK(f.t0 * 1e6 == Approx(428.2).epsilon(5e-4));
    // Eq. 22 applies with these parameters, and eq. 21: t = t_p + 2M/B'.
    CHECK(allreduce_peak_eq22(p) == Approx(f.bandwidth).epsilon(1e-12));
    const double m = 64.0 * 1024 * 1024;
    CHECK(allreduce_seconds(p, m) == Approx(f.t0 + 2 * m / f.bandwidth).epsilon(1e-12));
    // Eq. 25: Tc = (46,000 - 2 x 13,500) / 4.
    CHECK(reduction_rate_from_memory(46000e6, 13500e6) / 1e6 == Approx(4750));
}

TEST_CASE("Allreduce model keeps the max() terms when eq. 20 does not apply", "[model]") {
    AllreduceParameters p;
    p.bcast_segment = 256; // m_B / (B/3) = 57 ns < L: latency-bound segments
    p.reduce_segment = 256;
    ModelFigures f = allreduce_figures(p);
    CHECK(f.bandwidth < allreduce_peak_eq22(p));
    CHECK(allreduce_seconds(p, 3 * 256) > allreduce_seconds(p, 0));
}

TEST_CASE("Allgather model matches 002 Table 1 with the parameters of Table 7", "[model]") {
    AllgatherParameters p; // 8 x 6 x 8, B 15,000 MB/s, Ls 1.0 us, Lw 0.6 us
    CHECK(allgather_switch_bytes(p) / 1024 == Approx(49.8).epsilon(1e-3));
    ModelFigures small = allgather_figures(p, AllgatherRegime::latency_bound);
    CHECK(small.bandwidth / 1e6 == Approx(1920000));
    CHECK(small.t0 * 1e6 == Approx(1534).epsilon(1e-3));
    // 002 prints 7.669E+07; its definition t0 B'/np (which reproduces its measured column) gives
    // 7.669E+06.
    CHECK(small.half_length == Approx(7.669e6).epsilon(1e-3));
    ModelFigures large = allgather_figures(p, AllgatherRegime::bandwidth_bound);
    CHECK(large.bandwidth / 1e6 == Approx(15040).epsilon(1e-3));
    CHECK(large.t0 * 1e6 == Approx(241.8).epsilon(1e-3));
    CHECK(large.half_length == Approx(9.470e3).epsilon(1e-3));
    CHECK(allgather_peak(p) == Approx(large.bandwidth));
    // Eq. 26 reduces to eq. 27 and 29 on either side of the switch.
    CHECK(allgather_seconds(p, 0) == Approx(small.t0));
    const double m = 1024.0 * 1024;
    CHECK(allgather_seconds(p, m) == Approx(large.t0 + m * 383 / p.bandwidth));
}

TEST_CASE("allreduce step model of the emulated Tofu", "[model]") {
    pmr_bench::TofuNetwork k;
    k.link_bandwidth = 4.76e9;
    k.latency = 0.91e-6;
    k.injection_bandwidth = 15.03e9;
    k.time_scale = 20;
    const double m = 1 << 20;
    // One step of b bytes on one rail: scale (L + b / B_link).
    CHECK(pmr_bench::step_seconds(k, m, 1) == Approx(20 * (0.91e-6 + m / 4.76e9)));
    // Four rails at once are capped by the host interface: 4 b / B_injection.
    CHECK(pmr_bench::step_seconds(k, m, 4) == Approx(20 * (0.91e-6 + 4 * m / 15.03e9)));
    // 8 ranks: recursive doubling 3 steps of M, ring 14 steps of M/8.
    CHECK(pmr_bench::recursive_doubling_seconds(k, 8, m) ==
          Approx(3 * pmr_bench::step_seconds(k, m, 1)));
    CHECK(pmr_bench::ring_seconds(k, 8, m) == Approx(14 * pmr_bench::step_seconds(k, m / 8, 1)));
    // 2 x 2 x 2: three parts of M/3 halve three times, both ways, three rails per step.
    const double t3 =
        2 * (pmr_bench::step_seconds(k, m / 6, 3) + pmr_bench::step_seconds(k, m / 12, 3) +
             pmr_bench::step_seconds(k, m / 24, 3));
    CHECK(pmr_bench::trinaryx3_seconds(k, {2, 2, 2}, m) == Approx(t3));
    // Bandwidth-bound, that is 3x the ring's bandwidth (7M/12 per rail against 7M/4).
    CHECK(pmr_bench::ring_seconds(k, 8, 64 * m) /
              pmr_bench::trinaryx3_seconds(k, {2, 2, 2}, 64 * m) ==
          Approx(3).epsilon(0.01));
    // A flat dimension moves nothing: 1 x 2 x 2 has two rails per phase and two phases per part.
    CHECK(pmr_bench::trinaryx3_seconds(k, {1, 2, 2}, m) > 0);
    CHECK(pmr_bench::trinaryx3_seconds(k, {1, 1, 1}, m) == 0);
}

TEST_CASE("summaries are order statistics", "[stats]") {
    Summary s = summarize({5, 1, 4, 2, 3});
    CHECK(s.count == 5);
    CHECK(s.min == 1);
    CHECK(s.p25 == 2);
    CHECK(s.median == 3);
    CHECK(s.p75 == 4);
    CHECK(s.max == 5);
    CHECK(s.mean == 3);
    CHECK(s.mad == 1);
    CHECK(summarize({1, 2}).median == Approx(1.5));
    CHECK(summarize({}).count == 0);
}

TEST_CASE("sizes and ranges parse in binary units", "[options]") {
    CHECK(parse_size("4K") == 4096);
    CHECK(parse_size("16M") == 16u << 20);
    CHECK(parse_size("3000") == 3000);
    CHECK_THROWS_AS(parse_size("4X"), UsageError);
    CHECK_THROWS_AS(parse_size("K"), UsageError);
    CHECK(parse_sizes({"0", "8:64"}) == std::vector<std::size_t>{0, 8, 16, 32, 64});
    CHECK(parse_sizes({"1K:64K:8", "1K"}) == std::vector<std::size_t>{1024, 8192, 65536});
    CHECK(parse_sizes({"0:4"}) == std::vector<std::size_t>{0, 1, 2, 4});
    CHECK_THROWS_AS(parse_sizes({"64:8"}), UsageError);
    CHECK(format_size(4096) == "4 KiB");
    CHECK(format_size(3000) == "3000 B");
}

TEST_CASE("patterns tell rounds, senders and channels apart", "[pattern]") {
    std::vector<unsigned char> buffer(1003);
    auto seed = pattern_seed(7, 1, 0);
    fill_pattern(buffer.data(), buffer.size(), seed);
    CHECK(find_mismatch(buffer.data(), buffer.size(), seed) == buffer.size());
    CHECK(find_mismatch(buffer.data(), buffer.size(), pattern_seed(7, 1, 1)) < 8);
    CHECK(find_mismatch(buffer.data(), buffer.size(), pattern_seed(6, 1, 0)) < 8);
    CHECK(find_mismatch(buffer.data(), buffer.size(), pattern_seed(7, 0, 0)) < 8);
    buffer[1001] ^= 1;
    CHECK(find_mismatch(buffer.data(), buffer.size(), seed) == 1001);
}
