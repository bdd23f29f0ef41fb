// SPDX-License-Identifier: MIT
// The network timing model of the emulated Tofu interconnect: what a put costs on a TNI, on the
// node's host interface and on the wire, so that what a receiver observes follows published Tofu
// figures instead of the speed of this machine's memory.
//
// Per put of b bytes issued at time t on TNI i, towards a node `hops` links away:
//   start  = max(t, TNI i free)                       each TNI is a serial resource
//   busy   = the TNIs transferring at `start`, this one included
//   done   = start + b / min(link bandwidth, injection bandwidth / busy)
//            TNI i is free again, the source is read (the node's injection, the host-interface
//            cap, is shared fairly by the TNIs under way when the put starts)
//   land   = done + put latency + (hops - 1) * hop latency
// Every modelled duration is multiplied by the time scale. With the model off every put is done
// and landed when it is issued.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pmr::detail::tofu {

/// Parameters of the model; the presets name the source of every figure (model.cpp).
struct ModelParameters {
    std::string name = "off";         ///< "off", "k", "fugaku"
    bool enabled = false;             ///< false: no modelled delays at all
    std::size_t tnis = 4;             ///< TNIs per node
    double link_bandwidth = 0.0;      ///< bytes per second a TNI puts
    double put_latency = 0.0;         ///< seconds, one-way put to a neighbour (1 hop)
    double hop_latency = 0.0;         ///< seconds per hop beyond the first
    double injection_bandwidth = 0.0; ///< bytes per second of all TNIs of a node together
    double time_scale = 1.0;          ///< stretches every modelled time
};

/// The preset `name` ("off", "k", "fugaku"). @throws ArgumentError for another name.
ModelParameters model_preset(const std::string& name);

/// The model of this process from PMR_TOFU_MODEL (default fugaku) and the overrides
/// PMR_TOFU_TNIS, PMR_TOFU_LINK_GBS, PMR_TOFU_LATENCY_US, PMR_TOFU_HOP_LATENCY_US,
/// PMR_TOFU_INJECTION_GBS, PMR_TOFU_TIME_SCALE. @throws ArgumentError naming the variable.
ModelParameters read_model_parameters();

/// When a put happens, in nanoseconds of the steady clock (CLOCK_MONOTONIC, one clock for every
/// process of the machine).
struct PutTimes {
    std::int64_t start = 0;
    std::int64_t done = 0; ///< the TNI has read the whole source
    std::int64_t land = 0; ///< data and notice are visible at the receiver
};

/// The clocks of one node: one per TNI and the injection clock. Not thread-safe.
class TimingModel {
public:
    explicit TimingModel(ModelParameters parameters);

    const ModelParameters& parameters() const noexcept { return parameters_; }
    bool enabled() const noexcept { return parameters_.enabled; }

    /// Books a put of `bytes` issued at `now` on `tni` towards a node `hops` links away.
    PutTimes schedule(std::size_t tni, std::size_t bytes, int hops, std::int64_t now);

    /// The modelled one-way time of a lone put (prediction for benchmarks), in seconds.
    double lone_put_seconds(std::size_t bytes, int hops) const noexcept;
    /// Modelled bandwidth in bytes per second of `tnis` TNIs streaming large puts at once.
    double streaming_bandwidth(std::size_t tnis) const noexcept;

private:
    std::int64_t scaled_ns(double seconds) const noexcept;

    ModelParameters parameters_;
    std::vector<std::int64_t> tni_free_;
};

/// The steady clock in nanoseconds.
std::int64_t now_ns() noexcept;

} // namespace pmr::detail::tofu
