// SPDX-License-Identifier: MIT
#include "providers/tofu/emulated/model.hpp"

#include "base/error.hpp"

#include <pmr/settings.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace pmr::detail::tofu {
namespace {

// A positive setting: the registry's value (a number or, for durations, seconds) times `unit`, or
// `fallback` where unset.
template <class Read>
double positive(const char* name, Read read, double fallback, double unit) {
    const auto value = read(name);
    if (!value) {
        return fallback;
    }
    if (!(*value > 0)) {
        raise<ArgumentError>(std::string("environment variable ") + name + "='" +
                                 settings::value(name).text + "' is not a positive number",
                             "tofu timing model",
                             std::string("Unset it or give a positive value."));
    }
    return *value * unit;
}

} // namespace

ModelParameters model_preset(const std::string& name) {
    ModelParameters p;
    p.name = name;
    if (name == "off") {
        p.enabled = false;
        p.tnis = 4;
        return p;
    }
    p.enabled = true;
    // A machine's TNIs per node, bandwidth per link, one-way latency of an 8-byte put to a
    // neighbour and injection bandwidth per node. Not in the seeds: an assumed 100 ns per
    // additional hop (router and cable); override with PMR_TOFU_HOP_LATENCY_US.
    auto machine = [&](std::size_t tnis, double link_bandwidth, double put_latency,
                       double injection_bandwidth) {
        p.tnis = tnis;
        p.link_bandwidth = link_bandwidth;
        p.put_latency = put_latency;
        p.injection_bandwidth = injection_bandwidth;
        p.hop_latency = 0.1e-6;
        return p;
    };
    if (name == "k") {
        // Tofu of the K computer, Shida, Sumimoto, Uno, "MPI library and low-level communication
        // on the K computer" (seed 000), section 6.1: 4 TNIs per node; 4.76 GB/s per link for a
        // 16 MB message at the Tofu-library level (links are 5 GB/s raw); 0.91 us hardware
        // latency of an 8-byte put to a neighbour (0.92 us at the library level); 15.03 GB/s
        // over 4 TNIs, limited by the CPU-side interface (Figure 2).
        return machine(4, 4.76e9, 0.91e-6, 15.03e9);
    }
    if (name == "fugaku") {
        // Tofu-D of Fugaku, Ajima et al., "The Tofu Interconnect D", IEEE Cluster 2018: 6 TNIs
        // per node; 6.8 GB/s per link (28 Gbps x 2 lanes); 0.49 us one-way 8-byte put latency;
        // 38.1 GB/s injection per node.
        return machine(6, 6.8e9, 0.49e-6, 38.1e9);
    }
    raise<ArgumentError>("unknown Tofu timing model '" + name + "'", "tofu timing model",
                         "Set PMR_TOFU_MODEL to off, k or fugaku.");
}

ModelParameters read_model_parameters() {
    ModelParameters p = model_preset(*settings::choice("PMR_TOFU_MODEL"));
    if (const auto tnis = settings::integer("PMR_TOFU_TNIS")) {
        p.tnis = static_cast<std::size_t>(*tnis);
    }
    const auto number = [](const char* name) { return settings::number(name); };
    const auto seconds = [](const char* name) { return settings::duration(name); };
    p.link_bandwidth = positive("PMR_TOFU_LINK_GBS", number, p.link_bandwidth, 1e9);
    p.put_latency = positive("PMR_TOFU_LATENCY_US", seconds, p.put_latency, 1.0);
    p.hop_latency = positive("PMR_TOFU_HOP_LATENCY_US", seconds, p.hop_latency, 1.0);
    p.injection_bandwidth = positive("PMR_TOFU_INJECTION_GBS", number, p.injection_bandwidth, 1e9);
    p.time_scale = positive("PMR_TOFU_TIME_SCALE", number, p.time_scale, 1.0);
    if (p.enabled && (p.link_bandwidth <= 0 || p.injection_bandwidth <= 0)) {
        raise<ArgumentError>("the Tofu timing model needs a link and an injection bandwidth",
                             "tofu timing model",
                             "Set PMR_TOFU_LINK_GBS and PMR_TOFU_INJECTION_GBS.");
    }
    return p;
}

std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

TimingModel::TimingModel(ModelParameters parameters)
    : parameters_(std::move(parameters)), tni_free_(parameters_.tnis, 0) {}

std::int64_t TimingModel::scaled_ns(double seconds) const noexcept {
    return static_cast<std::int64_t>(std::llround(seconds * parameters_.time_scale * 1e9));
}

PutTimes TimingModel::schedule(std::size_t tni, std::size_t bytes, int hops, std::int64_t now) {
    PutTimes t;
    if (!parameters_.enabled) {
        t.start = t.done = t.land = now;
        return t;
    }
    std::int64_t& free = tni_free_.at(tni);
    t.start = std::max(now, free);
    const auto b = static_cast<double>(bytes);
    // The node's injection is shared by the TNIs transferring when this put starts: its rate is
    // the link's or its fair share of the injection, whichever is lower. (Rates are fixed when a
    // put is issued; a put issued later does not slow down those already under way.)
    std::size_t busy = 1;
    for (std::size_t other = 0; other < tni_free_.size(); ++other) {
        if (other != tni && tni_free_[other] > t.start) {
            ++busy;
        }
    }
    const double rate = std::min(parameters_.link_bandwidth,
                                 parameters_.injection_bandwidth / static_cast<double>(busy));
    t.done = t.start + scaled_ns(b / rate);
    free = t.done;
    const int extra_hops = hops > 1 ? hops - 1 : 0;
    t.land = t.done + scaled_ns(parameters_.put_latency + extra_hops * parameters_.hop_latency);
    return t;
}

double TimingModel::lone_put_seconds(std::size_t bytes, int hops) const noexcept {
    if (!parameters_.enabled) {
        return 0.0;
    }
    const auto b = static_cast<double>(bytes);
    const double wire =
        std::max(b / parameters_.link_bandwidth, b / parameters_.injection_bandwidth);
    const int extra_hops = hops > 1 ? hops - 1 : 0;
    return (wire + parameters_.put_latency + extra_hops * parameters_.hop_latency) *
           parameters_.time_scale;
}

double TimingModel::streaming_bandwidth(std::size_t tnis) const noexcept {
    if (!parameters_.enabled) {
        return 0.0;
    }
    return std::min(static_cast<double>(tnis) * parameters_.link_bandwidth,
                    parameters_.injection_bandwidth) /
           parameters_.time_scale;
}

} // namespace pmr::detail::tofu
