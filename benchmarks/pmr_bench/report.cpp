// SPDX-License-Identifier: MIT
#include "report.hpp"

#include "options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

namespace pmr_bench {

double speedup(const Series& pmr, const Series& mpi, std::size_t i) {
    if (i >= pmr.sizes.size() || i >= mpi.sizes.size()) {
        return 0;
    }
    double p = pmr.sizes[i].seconds.median;
    double m = mpi.sizes[i].seconds.median;
    return p > 0 && m > 0 ? m / p : 0;
}

namespace {

std::string printf_string(const char* format, double value) {
    char text[64];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

/// Four significant digits without exponent, for microseconds and MB/s.
std::string readable(double value) {
    double a = std::fabs(value);
    const char* format = a < 10 ? "%.3f" : a < 100 ? "%.2f" : a < 1000 ? "%.1f" : "%.0f";
    return printf_string(format, value);
}

std::string microseconds(double seconds) {
    return readable(seconds * 1e6);
}
std::string megabytes_per_second(double bytes_per_second) {
    return readable(bytes_per_second / 1e6);
}

std::string pad(const std::string& text, std::size_t width) {
    return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::vector<const Series*> of_family(const Report& report, const std::string& family) {
    std::vector<const Series*> result;
    for (const auto& s : report.series) {
        if (s.family == family) {
            result.push_back(&s);
        }
    }
    return result;
}

void print_time_table(std::ostream& out, const Report& report) {
    std::size_t width = 10;
    for (const auto& s : report.series) {
        width = std::max(width, s.variant.size() + 2);
    }
    width = std::max<std::size_t>(width, 16);
    out << "\nTime [us], median over samples, +-: half the interquartile range in % of the "
           "median\n";
    out << pad("size", 10);
    for (const auto& s : report.series) {
        out << pad(s.variant, width);
    }
    out << "\n";
    for (std::size_t i = 0; i < report.sizes.size(); ++i) {
        out << pad(format_size(report.sizes[i]), 10);
        for (const auto& s : report.series) {
            const Summary& t = s.sizes[i].seconds;
            double spread = t.median > 0 ? 50 * (t.p75 - t.p25) / t.median : 0;
            out << pad(microseconds(t.median) + " +-" + printf_string("%.0f", spread) + "%", width);
        }
        out << "\n";
    }
}

void print_bandwidth_table(std::ostream& out, const Report& report) {
    std::size_t width = 10;
    for (const auto& s : report.series) {
        width = std::max(width, s.variant.size() + 2);
    }
    out << "\nBandwidth [MB/s = 1e6 B/s]: bytes per iteration of the busiest rank / median time\n";
    out << pad("size", 10);
    for (const auto& s : report.series) {
        out << pad(s.variant, width);
    }
    out << "\n";
    for (std::size_t i = 0; i < report.sizes.size(); ++i) {
        out << pad(format_size(report.sizes[i]), 10);
        for (const auto& s : report.series) {
            out << pad(megabytes_per_second(s.sizes[i].bandwidth()), width);
        }
        out << "\n";
    }
}

std::size_t column_width(const std::vector<const Series*>& columns) {
    std::size_t width = 10;
    for (const Series* c : columns) {
        width = std::max(width, c->variant.size() + 2);
    }
    return width;
}

/// A row per size and a column per series; `cell(series, size index)` gives the ratio shown
/// (0 or less: none, printed as "-").
template <class Cell>
void print_ratio_table(std::ostream& out, const Report& report,
                       const std::vector<const Series*>& columns, Cell cell) {
    const std::size_t width = column_width(columns);
    out << pad("size", 10);
    for (const Series* c : columns) {
        out << pad(c->variant, width);
    }
    out << "\n";
    for (std::size_t i = 0; i < report.sizes.size(); ++i) {
        out << pad(format_size(report.sizes[i]), 10);
        for (const Series* c : columns) {
            const double value = cell(*c, i);
            out << pad(value > 0 ? printf_string("%.2f", value) : std::string("-"), width);
        }
        out << "\n";
    }
}

void print_speedups(std::ostream& out, const Report& report) {
    auto pmrs = of_family(report, "pmr");
    auto mpis = of_family(report, "mpi");
    if (pmrs.empty() || mpis.empty()) {
        return;
    }
    const std::size_t width = column_width(mpis);
    for (const Series* p : pmrs) {
        out << "\nSpeed-up of " << p->variant
            << " = MPI time / pmr time (above 1: pmr is faster)\n";
        print_ratio_table(out, report, mpis,
                          [p](const Series& m, std::size_t i) { return speedup(*p, m, i); });
        for (const Series* m : mpis) {
            std::size_t faster = 0;
            double lo = HUGE_VAL, hi = 0;
            std::size_t lo_at = 0, hi_at = 0;
            for (std::size_t i = 0; i < report.sizes.size(); ++i) {
                double r = speedup(*p, *m, i);
                faster += r > 1 ? 1 : 0;
                if (r < lo) {
                    lo = r;
                    lo_at = i;
                }
                if (r > hi) {
                    hi = r;
                    hi_at = i;
                }
            }
            if (report.sizes.empty()) {
                continue;
            }
            out << "  vs " << std::left << std::setw(static_cast<int>(width)) << m->variant
                << std::right << "faster at " << faster << "/" << report.sizes.size()
                << " sizes, speed-up " << printf_string("%.2f", lo) << " (at "
                << format_size(report.sizes[lo_at]) << ") to " << printf_string("%.2f", hi)
                << " (at " << format_size(report.sizes[hi_at]) << ")\n";
        }
    }
}

/// Every variant's time over each reference's (the local copy of the same bytes, or the
/// synchronisation floor of the collectives): how far a variant is from that bound.
void print_copy_bound(std::ostream& out, const Report& report) {
    std::vector<const Series*> others;
    for (const auto& s : report.series) {
        if (!s.is_reference()) {
            others.push_back(&s);
        }
    }
    if (others.empty()) {
        return;
    }
    for (const Series* ref : of_family(report, "reference")) {
        const char* meaning = ref->variant == "memcpy"
                                  ? "as fast as one local copy of the same bytes"
                                  : "as fast as the reference, the least any variant can take";
        out << "\nTime over " << ref->variant << " = variant time / " << ref->variant
            << " time (1.00: " << meaning << ")\n";
        print_ratio_table(out, report, others, [ref](const Series& s, std::size_t i) {
            const double ratio = speedup(s, *ref, i);
            return ratio > 0 ? 1 / ratio : 0;
        });
    }
}

/// Every pmr variant that has a prediction ("model-X" for "pmr-X"): measured time / predicted time.
void print_model_ratio(std::ostream& out, const Report& report) {
    std::vector<const Series*> measured;
    std::vector<const Series*> predicted;
    for (const Series* model : of_family(report, "model")) {
        const std::string name = "pmr-" + model->variant.substr(model->variant.find('-') + 1);
        for (const auto& s : report.series) {
            if (s.variant == name) {
                measured.push_back(&s);
                predicted.push_back(model);
            }
        }
    }
    if (measured.empty()) {
        return;
    }
    out << "\nMeasured / model = measured time / the model's prediction (1.00: as predicted)\n";
    print_ratio_table(out, report, measured, [&](const Series& s, std::size_t i) {
        const auto k = static_cast<std::size_t>(std::find(measured.begin(), measured.end(), &s) -
                                                measured.begin());
        const double ratio = speedup(s, *predicted[k], i); // predicted / measured
        return ratio > 0 ? 1 / ratio : 0;
    });
}

std::string fit_range(const Report& report) {
    if (report.fit_first == 0 && report.fit_last == static_cast<std::size_t>(-1)) {
        return "all sizes";
    }
    return "sizes " + format_size(report.fit_first) + " to " +
           (report.fit_last == static_cast<std::size_t>(-1) ? std::string("the largest")
                                                            : format_size(report.fit_last));
}

void print_fits(std::ostream& out, const Report& report) {
    out << "\nThroughput model t(M) = t0 + M/B, least squares on relative residuals over "
        << fit_range(report)
        << "\n(M = bytes per iteration of the busiest rank; M1/2 = t0 * B: half the peak)\n";
    std::size_t width = 16;
    for (const auto& s : report.series) {
        width = std::max(width, s.variant.size() + 2);
    }
    out << std::left << std::setw(static_cast<int>(width)) << "variant" << std::right
        << pad("B [MB/s]", 12) << pad("t0 [us]", 10) << pad("M1/2 [B]", 12) << pad("rms resid", 11)
        << pad("max resid", 11) << "\n";
    for (const auto& s : report.series) {
        out << std::left << std::setw(static_cast<int>(width)) << s.variant << std::right;
        if (!s.fit.valid) {
            out << "  no fit (needs two sizes with growing time)\n";
            continue;
        }
        out << pad(megabytes_per_second(s.fit.bandwidth), 12) << pad(microseconds(s.fit.t0), 10)
            << pad(printf_string("%.0f", s.fit.half_length), 12)
            << pad(printf_string("%.1f%%", 100 * s.fit.rms_residual), 11)
            << pad(printf_string("%.1f%%", 100 * s.fit.max_residual), 11) << "\n";
    }
}

std::string json_string(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                out += printf_string("\\u%04x", static_cast<unsigned char>(c));
            } else {
                out += c;
            }
        }
    }
    return out + "\"";
}

std::string json_number(double value) {
    return std::isfinite(value) ? printf_string("%.9g", value) : "null";
}

std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) {
        return text;
    }
    std::string out = "\"";
    for (char c : text) {
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    return out + "\"";
}

} // namespace

void print_report(std::ostream& out, const Report& report) {
    out << "pmr-bench " << report.benchmark << "\n";
    std::size_t key_width = 0;
    for (const auto& [key, value] : report.header) {
        key_width = std::max(key_width, key.size());
    }
    for (const auto& [key, value] : report.header) {
        out << "  " << std::left << std::setw(static_cast<int>(key_width)) << key << std::right
            << "  " << value << "\n";
    }
    out << "  " << std::left << std::setw(static_cast<int>(key_width)) << "time" << std::right
        << "  " << report.time_meaning << "\n";
    out << "\nVariants:\n";
    for (const auto& s : report.series) {
        out << "  " << std::left << std::setw(18) << s.variant << std::right << s.description
            << "\n";
    }
    print_time_table(out, report);
    print_bandwidth_table(out, report);
    print_speedups(out, report);
    print_copy_bound(out, report);
    print_model_ratio(out, report);
    print_fits(out, report);
    bool any_failure = false;
    for (const auto& s : report.series) {
        if (s.verify_failures > 0) {
            if (!any_failure) {
                out << "\nWRONG RESULTS:\n";
            }
            any_failure = true;
            out << "  " << s.variant << ": " << s.verify_failures
                << " wrong messages (all ranks); first: " << s.first_failure << "\n";
        }
    }
    if (!report.notes.empty()) {
        out << "\nNotes:\n";
        for (const auto& note : report.notes) {
            out << "  - " << note << "\n";
        }
    }
}

void write_csv(std::ostream& out, const Report& report) {
    auto pmrs = of_family(report, "pmr");
    out << "benchmark,variant,family,size_bytes,volume_bytes,iterations,samples,min_us,p25_us,"
           "median_us,p75_us,max_us,mean_us,mad_us,bandwidth_MBps,verify_failures";
    for (const Series* p : pmrs) {
        out << ",speedup_of_" << p->variant;
    }
    out << "\n";
    for (const auto& s : report.series) {
        for (std::size_t i = 0; i < s.sizes.size(); ++i) {
            const SizeResult& r = s.sizes[i];
            const Summary& t = r.seconds;
            out << csv_field(report.benchmark) << "," << csv_field(s.variant) << "," << s.family
                << "," << r.bytes << "," << json_number(r.volume) << "," << r.iterations << ","
                << t.count;
            for (double v : {t.min, t.p25, t.median, t.p75, t.max, t.mean, t.mad}) {
                out << "," << json_number(v * 1e6);
            }
            out << "," << json_number(r.bandwidth() / 1e6) << "," << s.verify_failures;
            for (const Series* p : pmrs) {
                out << "," << json_number(speedup(*p, s, i));
            }
            out << "\n";
        }
    }
}

void write_json(std::ostream& out, const Report& report) {
    out << "{\n  \"tool\": \"pmr-bench\",\n  \"benchmark\": " << json_string(report.benchmark)
        << ",\n  \"header\": {";
    for (std::size_t k = 0; k < report.header.size(); ++k) {
        out << (k ? "," : "") << "\n    " << json_string(report.header[k].first) << ": "
            << json_string(report.header[k].second);
    }
    out << "\n  },\n  \"time_meaning\": " << json_string(report.time_meaning)
        << ",\n  \"volume_factor\": " << json_number(report.volume_factor)
        << ",\n  \"fit_sizes\": " << json_string(fit_range(report)) << ",\n  \"sizes\": [";
    for (std::size_t i = 0; i < report.sizes.size(); ++i) {
        out << (i ? ", " : "") << report.sizes[i];
    }
    out << "],\n  \"variants\": [";
    for (std::size_t v = 0; v < report.series.size(); ++v) {
        const Series& s = report.series[v];
        out << (v ? "," : "") << "\n    {\"name\": " << json_string(s.variant)
            << ", \"family\": " << json_string(s.family)
            << ", \"description\": " << json_string(s.description)
            << ", \"verify_failures\": " << s.verify_failures
            << ", \"first_failure\": " << json_string(s.first_failure) << ",\n     \"fit\": ";
        if (s.fit.valid) {
            out << "{\"bandwidth_Bps\": " << json_number(s.fit.bandwidth)
                << ", \"t0_s\": " << json_number(s.fit.t0)
                << ", \"half_length_bytes\": " << json_number(s.fit.half_length)
                << ", \"rms_relative_residual\": " << json_number(s.fit.rms_residual)
                << ", \"max_relative_residual\": " << json_number(s.fit.max_residual)
                << ", \"points\": " << s.fit.points << "}";
        } else {
            out << "null";
        }
        out << ",\n     \"results\": [";
        for (std::size_t i = 0; i < s.sizes.size(); ++i) {
            const SizeResult& r = s.sizes[i];
            const Summary& t = r.seconds;
            out << (i ? "," : "") << "\n       {\"size_bytes\": " << r.bytes
                << ", \"volume_bytes\": " << json_number(r.volume)
                << ", \"iterations\": " << r.iterations << ", \"samples\": " << t.count
                << ", \"min_s\": " << json_number(t.min) << ", \"p25_s\": " << json_number(t.p25)
                << ", \"median_s\": " << json_number(t.median)
                << ", \"p75_s\": " << json_number(t.p75) << ", \"max_s\": " << json_number(t.max)
                << ", \"mean_s\": " << json_number(t.mean) << ", \"mad_s\": " << json_number(t.mad)
                << ", \"bandwidth_Bps\": " << json_number(r.bandwidth()) << "}";
        }
        out << "]}";
    }
    out << "\n  ],\n  \"speedups\": [";
    bool first = true;
    for (const auto& p : report.series) {
        for (const auto& m : report.series) {
            if (!p.is_pmr() || !m.is_mpi()) {
                continue;
            }
            for (std::size_t i = 0; i < report.sizes.size(); ++i) {
                out << (first ? "" : ",") << "\n    {\"pmr\": " << json_string(p.variant)
                    << ", \"mpi\": " << json_string(m.variant)
                    << ", \"size_bytes\": " << report.sizes[i]
                    << ", \"mpi_time_over_pmr_time\": " << json_number(speedup(p, m, i)) << "}";
                first = false;
            }
        }
    }
    out << "\n  ],\n  \"copy_bound\": [";
    first = true;
    for (const auto& ref : report.series) {
        for (const auto& s : report.series) {
            if (!ref.is_reference() || s.is_reference()) {
                continue;
            }
            for (std::size_t i = 0; i < report.sizes.size(); ++i) {
                const double ratio = speedup(s, ref, i);
                out << (first ? "" : ",") << "\n    {\"variant\": " << json_string(s.variant)
                    << ", \"reference\": " << json_string(ref.variant)
                    << ", \"size_bytes\": " << report.sizes[i]
                    << ", \"time_over_reference\": " << json_number(ratio > 0 ? 1 / ratio : NAN)
                    << "}";
                first = false;
            }
        }
    }
    out << "\n  ],\n  \"notes\": [";
    for (std::size_t k = 0; k < report.notes.size(); ++k) {
        out << (k ? "," : "") << "\n    " << json_string(report.notes[k]);
    }
    out << "\n  ]\n}\n";
}

} // namespace pmr_bench
