// SPDX-License-Identifier: MIT
#include "model_command.hpp"

#include "model.hpp"
#include "options.hpp"

#include <cmath>
#include <cstdio>
#include <iomanip>

namespace pmr_bench {

namespace {

void declare(Options& o) {
    o.declare("np", Arity::many, "NP1 NP2 NP3", "torus extents", {"8", "6", "8"});
    o.declare("bandwidth", Arity::one, "MB/S", "B: bandwidth of the three links Allreduce uses",
              {"13500"});
    o.declare("links", Arity::one, "N", "links in B; ping-pong uses one: B / N", {"3"});
    o.declare("latency", Arity::one, "US", "L: latency of one transfer", {"1.6"});
    o.declare("t0", Arity::one, "US", "t0: software start-up of the collective", {"8.370"});
    o.declare("control", Arity::one, "US",
              "ping-pong control messages (002 Table 2: 1.751 + 1.829 + 1.785)", {"5.365"});
    o.declare("segment", Arity::one, "BYTES", "pipeline segment m_B of Bcast (and m_R)", {"16384"});
    o.declare("reduce-segment", Arity::one, "BYTES", "pipeline segment m_R of Reduce [--segment]");
    o.declare("tc", Arity::one, "MB/S", "Tc: reduction rate", {"4750"});
    o.declare("memory-bandwidth", Arity::one, "MB/S",
              "derive Tc = (B_mem - 2B) / 4 (eq. 25) instead of --tc, e.g. 46000");
    o.declare("allgather-bandwidth", Arity::one, "MB/S",
              "B of the four interfaces Allgather uses (002 Table 7)", {"15000"});
    o.declare("ls", Arity::one, "US", "Ls: latency of Allgather's 4-byte control packets", {"1.0"});
    o.declare("lw", Arity::one, "US", "Lw: latency of Allgather's data transfers", {"0.6"});
    o.declare("sizes", Arity::many, "SIZES",
              "also print predicted time and throughput per message size (e.g. 1K:64M:4)");
    o.declare("help", Arity::flag, "", "this text");
}

std::string fixed4(double value) {
    char text[48];
    double a = value < 0 ? -value : value;
    std::snprintf(text, sizeof text,
                  a >= 1e7   ? "%.4g"
                  : a < 10   ? "%.3f"
                  : a < 100  ? "%.2f"
                  : a < 1000 ? "%.1f"
                             : "%.0f",
                  value);
    return text;
}

std::string scientific(double value) {
    char text[48];
    std::snprintf(text, sizeof text, "%.3e", value);
    return text;
}

struct Row {
    std::string formula;
    ModelFigures figures;
    std::string paper; ///< 002 Table 1 estimate, for the default parameters
};

} // namespace

int run_model_command(const std::vector<std::string>& words, std::ostream& out) {
    Options o;
    declare(o);
    o.parse(words);
    if (o.flag("help")) {
        out << "usage: pmr-bench model [options]\n\n"
               "Prints peak bandwidth B, start-up time t0 and half-performance length M1/2 = t0 B\n"
               "that the closed formulas of 002 predict for ping-pong, Allreduce (Trinaryx3,\n"
               "eq. 17-25) and Allgather (3D multi-ring, eq. 26-31) on an np1 x np2 x np3 torus.\n"
               "The defaults are 002's K computer parameters (Tables 2, 6, 7).\n\n"
            << o.help();
        return 0;
    }
    bool defaults = true;
    for (const char* name :
         {"np", "bandwidth", "links", "latency", "t0", "control", "segment", "reduce-segment", "tc",
          "memory-bandwidth", "allgather-bandwidth", "ls", "lw"}) {
        defaults = defaults && !o.given(name);
    }

    const auto& np = o.values("np");
    if (np.size() != 3) {
        throw UsageError("--np needs three extents");
    }
    int extents[3];
    for (int d = 0; d < 3; ++d) {
        extents[d] = static_cast<int>(parse_size(np[static_cast<std::size_t>(d)]));
        if (extents[d] < 1) {
            throw UsageError("--np: extents must be at least 1");
        }
    }
    auto positive = [&](const char* name, double scale) {
        double v = o.number(name);
        if (!(v > 0)) {
            throw UsageError(std::string("--") + name + " must be positive");
        }
        return v * scale;
    };

    AllreduceParameters ar;
    ar.np1 = extents[0];
    ar.np2 = extents[1];
    ar.np3 = extents[2];
    ar.bandwidth = positive("bandwidth", 1e6);
    ar.latency = positive("latency", 1e-6);
    ar.t0 = o.number("t0") * 1e-6;
    ar.bcast_segment = static_cast<double>(parse_size(o.value("segment")));
    ar.reduce_segment = o.given("reduce-segment")
                            ? static_cast<double>(parse_size(o.value("reduce-segment")))
                            : ar.bcast_segment;
    if (!(ar.bcast_segment > 0 && ar.reduce_segment > 0)) {
        throw UsageError("segment sizes must be positive");
    }
    ar.reduction_rate =
        o.given("memory-bandwidth")
            ? reduction_rate_from_memory(positive("memory-bandwidth", 1e6), ar.bandwidth)
            : positive("tc", 1e6);
    if (!(ar.reduction_rate > 0)) {
        throw UsageError("Tc from --memory-bandwidth is not positive: B_mem must exceed 2 B");
    }

    PingPongParameters pp;
    pp.link_bandwidth = ar.bandwidth / positive("links", 1);
    pp.latency = ar.latency;
    pp.control = o.number("control") * 1e-6;

    AllgatherParameters ag;
    ag.np1 = ar.np1;
    ag.np2 = ar.np2;
    ag.np3 = ar.np3;
    ag.bandwidth = positive("allgather-bandwidth", 1e6);
    ag.short_latency = positive("ls", 1e-6);
    ag.long_latency = positive("lw", 1e-6);
    const int processes = ar.np1 * ar.np2 * ar.np3;
    const double switch_bytes = allgather_switch_bytes(ag);
    const bool two_regimes = switch_bytes > 0 && processes >= 4;

    out << "pmr-bench model: closed formulas of 002 on a " << ar.np1 << " x " << ar.np2 << " x "
        << ar.np3 << " torus (np = " << processes << ")\n"
        << "  B " << fixed4(ar.bandwidth / 1e6) << " MB/s (ping-pong: one link, "
        << fixed4(pp.link_bandwidth / 1e6) << " MB/s), L " << fixed4(ar.latency * 1e6) << " us, t0 "
        << fixed4(ar.t0 * 1e6) << " us, control " << fixed4(pp.control * 1e6) << " us\n  m_B "
        << ar.bcast_segment << " B, m_R " << ar.reduce_segment << " B, Tc "
        << fixed4(ar.reduction_rate / 1e6) << " MB/s; Allgather: B " << fixed4(ag.bandwidth / 1e6)
        << " MB/s, Ls " << fixed4(ag.short_latency * 1e6) << " us, Lw "
        << fixed4(ag.long_latency * 1e6) << " us\n"
        << "  throughput: ping-pong M/t, Allreduce 2M/t (eq. 23), Allgather np M/t "
           "(M per process)\n\n";

    std::vector<Row> rows;
    rows.push_back(
        {"ping-pong: L + control + M/B_link", pingpong_figures(pp), "4500 / 6.965 / 3.134e+04"});
    rows.push_back(
        {"Allreduce Trinaryx3 (eq. 17-24)", allreduce_figures(ar), "6306 / 428.2 / 1.350e+06"});
    if (two_regimes) {
        rows.push_back(
            {"Allgather 3D multi-ring, M < " + fixed4(switch_bytes / 1024) + " KiB (eq. 27-28)",
             allgather_figures(ag, AllgatherRegime::latency_bound),
             "1920000 / 1534 / 7.669e+07 (sic)"});
        rows.push_back({"Allgather 3D multi-ring, larger M (eq. 29-30)",
                        allgather_figures(ag, AllgatherRegime::bandwidth_bound),
                        "15040 / 241.8 / 9.470e+03"});
    } else {
        rows.push_back({"Allgather 3D multi-ring (eq. 29-30)",
                        allgather_figures(ag, AllgatherRegime::bandwidth_bound), ""});
    }

    out << std::left << std::setw(52) << "formula" << std::right << std::setw(12) << "B [MB/s]"
        << std::setw(11) << "t0 [us]" << std::setw(12) << "M1/2 [B]";
    if (defaults) {
        out << "   002 Table 1 estimate (B / t0 / M1/2)";
    }
    out << "\n";
    for (const auto& row : rows) {
        out << std::left << std::setw(52) << row.formula << std::right << std::setw(12)
            << fixed4(row.figures.bandwidth / 1e6) << std::setw(11) << fixed4(row.figures.t0 * 1e6)
            << std::setw(12) << scientific(row.figures.half_length);
        if (defaults) {
            out << "   " << row.paper;
        }
        out << "\n";
    }
    double eq22 = allreduce_peak_eq22(ar);
    out << "\nAllreduce peak by eq. 22 as printed: " << fixed4(eq22 / 1e6) << " MB/s"
        << (std::abs(eq22 - rows[1].figures.bandwidth) <= 1e-9 * eq22
                ? " (its conditions hold: same as above)"
                : " (its conditions m_B/(B/3) >= L and L + m_R/(Tc/3) >= m_R/(B/3) do not hold; "
                  "the row above keeps the max() terms of eq. 18-19)")
        << "\nAllgather peak by eq. 31: " << fixed4(allgather_peak(ag) / 1e6) << " MB/s\n";
    if (defaults) {
        out << "(002 prints M1/2 = 7.669e+07 for the short-message Allgather; its own definition "
               "t0 B'/np gives 7.669e+06, consistent with its measured 6.206e+05 = 1590 us x "
               "149800 MB/s / 384.)\n";
    }

    if (o.given("sizes")) {
        auto sizes = o.sizes("sizes");
        out << "\n"
            << std::setw(10) << "size" << std::setw(14) << "pingpong us" << std::setw(12) << "MB/s"
            << std::setw(14) << "allreduce us" << std::setw(12) << "MB/s" << std::setw(14)
            << "allgather us" << std::setw(12) << "MB/s"
            << "\n";
        for (auto bytes : sizes) {
            auto m = static_cast<double>(bytes);
            double tp = pingpong_seconds(pp, m);
            double ta = allreduce_seconds(ar, m);
            double tg = allgather_seconds(ag, m);
            out << std::setw(10) << format_size(bytes) << std::setw(14) << fixed4(tp * 1e6)
                << std::setw(12) << fixed4(m / tp / 1e6) << std::setw(14) << fixed4(ta * 1e6)
                << std::setw(12) << fixed4(2 * m / ta / 1e6) << std::setw(14) << fixed4(tg * 1e6)
                << std::setw(12) << fixed4(processes * m / tg / 1e6) << "\n";
        }
    }
    return 0;
}

} // namespace pmr_bench
