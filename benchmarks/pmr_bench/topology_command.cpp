// SPDX-License-Identifier: MIT
#include "topology_command.hpp"

#include "options.hpp"

#include "providers/tofu/topology.hpp"

#include <pmr/error.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace pmr_bench {
namespace {

namespace topo = pmr::detail::tofu_topology;

void print_help(std::ostream& out) {
    out << "usage: pmr-bench topology [--shape XxYxZ] [--virtual A B C] [--faulty NODE...]\n\n"
           "Maps a virtual 3D torus onto the Tofu 6D mesh/torus (X, Y, Z from --shape, the Tofu\n"
           "unit a x b x c = 2 x 3 x 2 implied) as pmr::tofu::virtual_torus does, and\n"
           "prints the hops between virtual neighbours, the nodes left out and the time it took.\n"
           "No ranks, no MPI.\n\n"
           "  --shape XxYxZ      the machine (default 24x23x24, Fugaku; the K computer is "
           "24x18x16)\n"
           "  --virtual A B C    the virtual torus (default the whole shape: 2X 3Y 2Z)\n"
           "  --faulty NODE...   faulty nodes X,Y,Z,a,b,c separated by spaces; the torus slides\n"
           "                     past them if the shape has room, else drops the virtual plane\n"
           "                     through each (see README, Tofu topology)\n";
}

int number(const std::string& option, const std::string& text) {
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < 1 || value > 1000000) {
        throw UsageError(option + " expects positive whole numbers, not '" + text + "'");
    }
    return static_cast<int>(value);
}

std::string with_thousands(std::size_t n) {
    std::string digits = std::to_string(n);
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
        digits.insert(static_cast<std::size_t>(i), ",");
    }
    return digits;
}

std::string dims_text(const std::array<int, 3>& d) {
    return std::to_string(d[0]) + " x " + std::to_string(d[1]) + " x " + std::to_string(d[2]);
}

} // namespace

int run_topology_command(const std::vector<std::string>& words, std::ostream& out) {
    std::string shape_text = "24x23x24";
    std::array<int, 3> dims{};
    bool dims_given = false;
    std::string faulty_text;
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& word = words[i];
        if (word == "--help" || word == "-h") {
            print_help(out);
            return 0;
        }
        if (word == "--shape") {
            if (++i >= words.size()) {
                throw UsageError("--shape expects XxYxZ");
            }
            shape_text = words[i];
        } else if (word == "--virtual") {
            if (i + 3 >= words.size()) {
                throw UsageError("--virtual expects three extents");
            }
            for (auto& d : dims) {
                d = number("--virtual", words[++i]);
            }
            dims_given = true;
        } else if (word == "--faulty") {
            // Every following word up to the next option is a node (the shell may also pass the
            // whole list as one quoted word).
            while (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) {
                faulty_text += " " + words[++i];
            }
        } else {
            throw UsageError("unknown option '" + word + "'");
        }
    }
    topo::Shape shape;
    std::vector<topo::Node> faulty;
    try {
        shape = topo::parse_shape(shape_text, "--shape");
        faulty = topo::parse_nodes(faulty_text, &shape, "--faulty");
    } catch (const pmr::ArgumentError& e) {
        throw UsageError(e.what());
    }
    if (!dims_given) {
        dims = {2 * shape.xyz[0], 3 * shape.xyz[1], 2 * shape.xyz[2]};
    }

    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    topo::Mapping mapping;
    try {
        mapping = topo::embed(shape, dims, faulty, /*shrink=*/true);
    } catch (const pmr::ArgumentError& e) {
        out << "pmr-bench topology: " << e.what() << "\n";
        return 1;
    }
    const auto mapped = clock::now();
    const topo::HopStatistics hops = topo::neighbour_hops(mapping);
    const auto measured = clock::now();
    const double map_seconds = std::chrono::duration<double>(mapped - start).count();
    const double hop_seconds = std::chrono::duration<double>(measured - mapped).count();

    std::string faulty_list;
    for (const auto& f : faulty) {
        faulty_list += (faulty_list.empty() ? "" : " ") + topo::format(f);
    }
    std::string policy = "none needed";
    if (mapping.slid) {
        policy = "slid past the faulty nodes (no node dropped)";
    } else if (mapping.faulty > 0) {
        policy = "dropped " + std::to_string(mapping.dropped[0]) + " / " +
                 std::to_string(mapping.dropped[1]) + " / " + std::to_string(mapping.dropped[2]) +
                 " virtual planes along axes 0 / 1 / 2";
    }
    char line[256];
    out << "shape           " << topo::format(shape) << "x2x3x2 = " << with_thousands(shape.nodes())
        << " nodes\n";
    out << "virtual torus   " << dims_text(mapping.requested) << " requested, "
        << dims_text(mapping.dims) << " mapped (" << with_thousands(mapping.nodes.size())
        << " nodes)\n";
    out << "faulty nodes    " << mapping.faulty << (faulty_list.empty() ? "" : " (") << faulty_list
        << (faulty_list.empty() ? "" : ")") << "\n";
    out << "faults          " << policy << "\n";
    out << "left out        " << with_thousands(mapping.left_out) << " healthy nodes\n";
    std::snprintf(
        line, sizeof line,
        "hops            mean %.6f, max %d over %s virtual links (1 hop: %s, 2: %s, "
        "3: %s, 4 or more: %s)\n",
        hops.mean, hops.max, with_thousands(hops.links).c_str(),
        with_thousands(hops.histogram[0]).c_str(), with_thousands(hops.histogram[1]).c_str(),
        with_thousands(hops.histogram[2]).c_str(), with_thousands(hops.histogram[3]).c_str());
    out << line;
    std::snprintf(line, sizeof line, "time            %.3f s (mapping %.3f s, hops %.3f s)\n",
                  map_seconds + hop_seconds, map_seconds, hop_seconds);
    out << line;
    return 0;
}

} // namespace pmr_bench
