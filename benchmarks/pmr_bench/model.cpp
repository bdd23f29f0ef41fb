// SPDX-License-Identifier: MIT
#include "model.hpp"

#include <algorithm>

namespace pmr_bench {

double pingpong_seconds(const PingPongParameters& p, double bytes) {
    return p.latency + p.control + bytes / p.link_bandwidth;
}

ModelFigures pingpong_figures(const PingPongParameters& p) {
    ModelFigures f;
    f.bandwidth = p.link_bandwidth;
    f.t0 = p.latency + p.control;
    f.half_length = f.t0 * f.bandwidth;
    return f;
}

namespace {

// Hops of the pipeline through the three rings: (np1 - 1) + (np2 - 1) + (np3 - 1) + 1.
double pipeline_stages(const AllreduceParameters& p) {
    return static_cast<double>(p.np1 + p.np2 + p.np3 - 2);
}

// Time per byte of the segment streams of eq. 18 (Bcast) and eq. 19 (Reduce). Each third of
// the message is (M/3)/m segments, each costing the slower of link and reduction.
double allreduce_slope(const AllreduceParameters& p) {
    double link = p.bandwidth / 3;
    double reduce = p.reduction_rate / 3;
    double bcast = std::max(p.latency, p.bcast_segment / link) / (3 * p.bcast_segment);
    double red = std::max(p.latency + p.reduce_segment / reduce, p.reduce_segment / link) /
                 (3 * p.reduce_segment);
    return bcast + red;
}

double allreduce_startup(const AllreduceParameters& p) {
    double link = p.bandwidth / 3;
    double reduce = p.reduction_rate / 3;
    double bcast = pipeline_stages(p) * (p.latency + p.bcast_segment / link) + p.latency + p.t0;
    double red =
        pipeline_stages(p) * (p.latency + p.reduce_segment / link + p.reduce_segment / reduce) +
        p.latency;
    return bcast + red;
}

} // namespace

double allreduce_seconds(const AllreduceParameters& p, double bytes) {
    return allreduce_startup(p) + bytes * allreduce_slope(p);
}

ModelFigures allreduce_figures(const AllreduceParameters& p) {
    ModelFigures f;
    f.t0 = allreduce_startup(p);
    f.bandwidth = 2 / allreduce_slope(p);
    f.half_length = f.bandwidth * f.t0 / 2;
    return f;
}

double allreduce_peak_eq22(const AllreduceParameters& p) {
    return 2 / (1 / p.bandwidth + 1 / p.reduction_rate + p.latency / (3 * p.reduce_segment));
}

double reduction_rate_from_memory(double memory_bandwidth, double bandwidth) {
    return (memory_bandwidth - 2 * bandwidth) / 4;
}

namespace {
double processes(const AllgatherParameters& p) {
    return static_cast<double>(p.np1) * p.np2 * p.np3;
}
} // namespace

double allgather_seconds(const AllgatherParameters& p, double bytes) {
    double step = p.long_latency + bytes / p.bandwidth;
    double control = 4 * p.short_latency;
    return 3 * (control + step) + std::max(control, step) * (processes(p) - 4);
}

double allgather_switch_bytes(const AllgatherParameters& p) {
    return p.bandwidth * (4 * p.short_latency - p.long_latency);
}

ModelFigures allgather_figures(const AllgatherParameters& p, AllgatherRegime regime) {
    double np = processes(p);
    double first = 3 * (4 * p.short_latency + p.long_latency);
    ModelFigures f;
    if (regime == AllgatherRegime::latency_bound) {
        f.t0 = first + 4 * p.short_latency * (np - 4);
        f.bandwidth = p.bandwidth * np / 3;
    } else {
        f.t0 = first + p.long_latency * (np - 4);
        f.bandwidth = p.bandwidth * np / (np - 1);
    }
    f.half_length = f.t0 * f.bandwidth / np;
    return f;
}

double allgather_peak(const AllgatherParameters& p) {
    double np = processes(p);
    return p.bandwidth * np / (np - 1);
}

} // namespace pmr_bench
