// SPDX-License-Identifier: MIT
#include "plot.hpp"

#include "options.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace pmr_bench {

std::string find_gnuplot() {
    const char* path = std::getenv("PATH");
    std::string directories = path != nullptr ? path : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= directories.size()) {
        std::size_t colon = directories.find(':', start);
        std::string directory = directories.substr(start, colon - start);
        std::string candidate = (directory.empty() ? "." : directory) + "/gnuplot";
        if (access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
        if (colon == std::string::npos) {
            break;
        }
        start = colon + 1;
    }
    return "";
}

std::string gnuplot_missing_message() {
    return "--plot needs gnuplot, which is not in PATH. Install it (Debian/Ubuntu: "
           "apt-get install gnuplot-nox) or leave out --plot and plot the --csv/--json output.";
}

namespace {
/// gnuplot single-quoted string: only the quote itself needs doubling.
std::string quoted(const std::string& text) {
    std::string out = "'";
    for (char c : text) {
        out += c == '\'' ? std::string("''") : std::string(1, c);
    }
    return out + "'";
}
} // namespace

std::string plot_script(const Report& report, const std::string& path) {
    std::ostringstream s;
    s.precision(9);
    s << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      << "  set terminal pngcairo size 1100,750 noenhanced font ',10'\n"
      << "} else {\n"
      << "  set terminal png size 1100,750 noenhanced\n"
      << "}\n"
      << "set output " << quoted(path) << "\n"
      << "set title "
      << quoted("pmr-bench " + report.benchmark +
                ": median bandwidth, bars p25-p75, dashed: fit t0 + M/B")
      << "\nset xlabel 'message size [bytes]'\n"
      << "set ylabel 'bandwidth [MB/s] (bytes per iteration of the busiest rank / time)'\n"
      << "set logscale xy\nset grid\nset key right bottom\n"
      << "set samples 400\n";
    // Size 0 has no place on a log axis and no bandwidth.
    for (std::size_t v = 0; v < report.series.size(); ++v) {
        s << "$series" << v << " << EOD\n";
        for (const auto& r : report.series[v].sizes) {
            if (r.bytes == 0 || r.seconds.median <= 0) {
                continue;
            }
            double low = r.seconds.p75 > 0 ? r.volume / r.seconds.p75 / 1e6 : 0;
            double high = r.seconds.p25 > 0 ? r.volume / r.seconds.p25 / 1e6 : 0;
            s << r.bytes << " " << r.bandwidth() / 1e6 << " " << low << " " << high << "\n";
        }
        s << "EOD\n";
    }
    double first = 0, last = 0;
    for (auto bytes : report.sizes) {
        auto b = static_cast<double>(bytes);
        if (b > 0 && (first == 0 || b < first)) {
            first = b;
        }
        last = std::max(last, b);
    }
    if (first > 0) {
        s << "set xrange [" << first / 1.5 << ":" << last * 1.5 << "]\n";
        // Ticks at powers of 4 with binary units, where gnuplot would put decimal ones.
        s << "set xtics (";
        bool any_tic = false;
        for (std::size_t tic = 1; static_cast<double>(tic) <= last * 1.5; tic *= 4) {
            if (static_cast<double>(tic) >= first / 1.5) {
                s << (any_tic ? ", " : "") << quoted(format_size(tic)) << " " << tic;
                any_tic = true;
            }
        }
        s << ")\n";
    }
    s << "plot \\\n";
    bool any = false;
    for (std::size_t v = 0; v < report.series.size(); ++v) {
        const Series& series = report.series[v];
        const int color = static_cast<int>(v) + 1;
        s << (any ? ", \\\n" : "") << "  $series" << v << " using 1:2:3:4 with yerrorlines lc "
          << color << " pt " << color << " title "
          << quoted(series.variant +
                    (series.verify_failures > 0 ? " (WRONG RESULTS)" : std::string()));
        any = true;
        if (series.fit.valid) {
            const double k = report.volume_factor;
            s << ", \\\n  (" << k << "*x)/(" << series.fit.t0 << " + " << k << "*x/"
              << series.fit.bandwidth << ")/1e6 with lines dt 2 lc " << color << " title "
              << quoted("fit: B " +
                        std::to_string(static_cast<long long>(series.fit.bandwidth / 1e6)) +
                        " MB/s, t0 " + std::to_string(series.fit.t0 * 1e6).substr(0, 6) + " us");
        }
    }
    s << "\n";
    return s.str();
}

std::string plot_report(const Report& report, const std::string& path, const std::string& gnuplot) {
    std::string script = plot_script(report, path);
    std::string command = "'" + gnuplot + "' 2>&1";
    FILE* pipe = popen(command.c_str(), "w");
    if (pipe == nullptr) {
        return "could not start " + gnuplot;
    }
    std::fwrite(script.data(), 1, script.size(), pipe);
    int status = pclose(pipe);
    if (status != 0) {
        return "gnuplot failed (exit status " +
               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ") while drawing " +
               path;
    }
    return "";
}

} // namespace pmr_bench
