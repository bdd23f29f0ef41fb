// SPDX-License-Identifier: MIT
/// @file allreduce_model.hpp
/// What the timing model of the emulated Tofu (src/providers/tofu/emulated/model.hpp) predicts for
/// pmr's allreduce algorithms, step by step as the plans of src/collectives/schedules.cpp run:
/// every step waits for its receives, and a step of b bytes that k rails of a node carry at once
/// costs scale x (L + max(b / B_link, k b / B_injection)) (the TNI of each rail is a serial
/// resource, the node's host interface is shared). Network only: no reduction arithmetic, no
/// software overhead, no control puts of the rail protocol. In the spirit of 002's closed formulas
/// (latency per step plus volume over bandwidth), for pmr's plans instead of Fujitsu's pipelines.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>

namespace pmr_bench {

struct TofuNetwork {
    std::string name;               ///< model preset ("k", "fugaku")
    std::size_t tnis = 4;           ///< TNIs per node
    double link_bandwidth = 0;      ///< bytes per second of one TNI
    double latency = 0;             ///< seconds, one put to a neighbour
    double injection_bandwidth = 0; ///< bytes per second of all TNIs of a node
    double time_scale = 1;          ///< stretches every modelled time
};

/// The model this process's tofu provider uses, when PMR_PROVIDER=tofu and its timing model is on
/// (PMR_TOFU_MODEL other than off); nothing otherwise or when tofu is not compiled in.
std::optional<TofuNetwork> emulated_tofu_network();

/// Seconds of one step in which `rails` rails of a node each carry `bytes` bytes (0 for none).
double step_seconds(const TofuNetwork& net, double bytes, int rails);

/// Recursive doubling of `bytes` over `ranks` (with the fold for non-powers of two).
double recursive_doubling_seconds(const TofuNetwork& net, int ranks, double bytes);
/// Ring reduce-scatter + allgather: 2 (p - 1) steps of about bytes / p.
double ring_seconds(const TofuNetwork& net, int ranks, double bytes);
/// Trinaryx3 on an n0 x n1 x n2 grid: three parts in lockstep, each phase carried by as many rails
/// as parts move in it.
double trinaryx3_seconds(const TofuNetwork& net, const std::array<int, 3>& extents, double bytes);

} // namespace pmr_bench
