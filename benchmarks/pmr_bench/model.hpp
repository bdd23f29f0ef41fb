// SPDX-License-Identifier: MIT
/// @file model.hpp
/// Closed-form communication times of 002 ("Evaluation of MPI communication performance using
/// throughput on the K computer") for ping-pong, Allreduce (Trinaryx3, eq. 17-25) and Allgather
/// (3D multi-ring, eq. 26-31) on an np1 x np2 x np3 torus. All quantities in SI units: bytes,
/// seconds, bytes per second.
#pragma once

namespace pmr_bench {

/// The three figures 002 reports per curve: throughput T(M) approaches `bandwidth`, the start-up
/// time is `t0` and T reaches half the peak at `half_length` (in the message size unit of the
/// formula: the message for ping-pong and Allreduce, one process' block for Allgather).
struct ModelFigures {
    double bandwidth = 0;
    double t0 = 0;
    double half_length = 0;
};

/// Ping-pong over one link: t(M) = L + t_ctrl + M / B_link, where t_ctrl is the time of the
/// protocol's control messages (002 Table 2 sums them to 5.365 us).
struct PingPongParameters {
    double link_bandwidth = 4500e6; ///< B of one link
    double latency = 1.6e-6;        ///< L
    double control = 5.365e-6;      ///< t_ctrl
};
double pingpong_seconds(const PingPongParameters& p, double bytes);
ModelFigures pingpong_figures(const PingPongParameters& p);

/// Trinaryx3 Allreduce: the message is cut in three, each third runs a pipelined Reduce and
/// Bcast along the three torus dimensions on its own link (B/3 each) and is reduced at Tc/3.
/// Defaults: 002 Table 6.
struct AllreduceParameters {
    int np1 = 8, np2 = 6, np3 = 8;
    double bandwidth = 13500e6;     ///< B, the three links together
    double latency = 1.6e-6;        ///< L
    double t0 = 8.370e-6;           ///< software start-up of the collective
    double bcast_segment = 16384;   ///< m_B, pipeline segment of the Bcast phase
    double reduce_segment = 16384;  ///< m_R, pipeline segment of the Reduce phase
    double reduction_rate = 4750e6; ///< Tc, bytes reduced per second (eq. 25)
};
/// t = t_R + t_B, eq. 17-19 (valid for every segment size, with the max() terms kept).
double allreduce_seconds(const AllreduceParameters& p, double bytes);
/// Throughput 2M / t (eq. 23): t0 = t(0) (eq. 20 when its condition holds), peak B' = 2 / slope
/// (eq. 22 when it holds), M1/2 = B' t0 / 2 (eq. 24).
ModelFigures allreduce_figures(const AllreduceParameters& p);
/// Eq. 22 as printed: B' = 2 / (1/B + 1/Tc + 1/(3 m / L)). Equals allreduce_figures().bandwidth
/// when m_B / (B/3) >= L and L + m_R / (Tc/3) >= m_R / (B/3).
double allreduce_peak_eq22(const AllreduceParameters& p);
/// Eq. 25: reduction rate from the memory bandwidth, Tc = (B_mem - 2B) / 4.
double reduction_rate_from_memory(double memory_bandwidth, double bandwidth);

/// 3D multi-ring Allgather over four network interfaces, each carrying a quarter of every block.
/// Defaults: 002 Table 7.
struct AllgatherParameters {
    int np1 = 8, np2 = 6, np3 = 8;
    double bandwidth = 15000e6;    ///< B, the four interfaces together
    double short_latency = 1.0e-6; ///< Ls, latency of the 4-byte control packets
    double long_latency = 0.6e-6;  ///< Lw, latency of a data transfer
};
enum class AllgatherRegime {
    latency_bound,   ///< M < B (4 Ls - Lw), eq. 27-28
    bandwidth_bound, ///< M >= B (4 Ls - Lw), eq. 29-30
};
/// Eq. 26 (final form): t = 3 (4 Ls + Lw + M/B) + max(4 Ls, Lw + M/B) (np - 4), M per process.
double allgather_seconds(const AllgatherParameters& p, double bytes);
/// Block size where the regimes meet: B (4 Ls - Lw).
double allgather_switch_bytes(const AllgatherParameters& p);
/// Throughput np M / t for one regime: t0 from eq. 27 or 29, B' from eq. 28 or 30, M1/2 = t0 B'/np.
ModelFigures allgather_figures(const AllgatherParameters& p, AllgatherRegime regime);
/// Eq. 31: the largest throughput, B np / (np - 1).
double allgather_peak(const AllgatherParameters& p);

} // namespace pmr_bench
