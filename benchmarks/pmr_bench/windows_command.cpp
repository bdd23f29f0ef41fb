// SPDX-License-Identifier: MIT
#include "windows_command.hpp"

#include "base/shared_memory.hpp"

#include <pmr/pmr.hpp>

#include <mpi.h>

#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace pmr_bench {
namespace {

std::size_t open_fds() {
    std::size_t count = 0;
    if (DIR* directory = opendir("/proc/self/fd")) {
        while (const dirent* entry = readdir(directory)) {
            count += entry->d_name[0] != '.' ? 1 : 0;
        }
        closedir(directory);
        --count; // the directory's own descriptor
    }
    return count;
}

std::size_t mappings() {
    std::ifstream maps("/proc/self/maps");
    std::size_t count = 0;
    for (std::string line; std::getline(maps, line);) {
        ++count;
    }
    return count;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The slowest rank's time: the pace of the job.
double slowest(double seconds) {
    double result = 0;
    MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return result;
}

double largest(double value) {
    double result = 0;
    MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return result;
}

struct Settings {
    std::size_t pairs = 2000;
    std::size_t connections = 1;
    std::size_t bytes = 4096;
    std::optional<pmr::Provider> provider;
};

Settings parse(const std::vector<std::string>& words) {
    Settings s;
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& word = words[i];
        if (word == "--help" || word == "-h") {
            throw std::invalid_argument("help");
        }
        if (i + 1 >= words.size()) {
            throw std::invalid_argument("option " + word + " needs a value");
        }
        const std::string& value = words[++i];
        if (word == "--pairs") {
            s.pairs = std::stoul(value);
        } else if (word == "--connections") {
            s.connections = std::stoul(value);
        } else if (word == "--bytes") {
            s.bytes = std::stoul(value);
        } else if (word == "--provider") {
            s.provider = pmr::provider_from_string(value);
            if (!s.provider) {
                throw std::invalid_argument("unknown provider " + value);
            }
        } else {
            throw std::invalid_argument("unknown option " + word);
        }
    }
    if (s.pairs == 0 || s.connections == 0) {
        throw std::invalid_argument("--pairs and --connections must be positive");
    }
    return s;
}

} // namespace

int run_windows_command(const std::vector<std::string>& words, std::ostream& out) {
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    Settings s;
    try {
        s = parse(words);
    } catch (const std::exception& e) {
        if (rank == 0) {
            out << "usage: mpirun -np <even> pmr-bench windows [--pairs N] [--connections C] "
                   "[--bytes B] [--provider NAME]\n"
                   "  N window pairs (default 2000) of B bytes (4096), library-owned, on C "
                   "connections (1) between ranks 2k and 2k+1\n";
            if (std::string(e.what()) != "help") {
                out << "error: " << e.what() << "\n";
            }
        }
        return std::string(e.what()) == "help" ? 0 : 2;
    }
    if (size % 2 != 0) {
        if (rank == 0) {
            out << "pmr-bench windows: needs an even number of ranks\n";
        }
        return 2;
    }
    const int peer = rank ^ 1;
    std::vector<pmr::Connection> connections;
    for (std::size_t c = 0; c < s.connections; ++c) {
        const pmr::Target target(MPI_COMM_WORLD, peer, static_cast<int>(c), static_cast<int>(c));
        connections.push_back(s.provider ? pmr::Connection(target, *s.provider)
                                         : pmr::Connection(target));
        // First use of the connection itself, outside the measurement.
        pmr::SendWindow<char> send(connections.back(), 8);
        pmr::RecvWindow<char> recv(connections.back(), 8);
        recv.init();
        send.init();
        send.post();
        recv.post();
        pmr::wait_all(send, recv);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::size_t fds_before = open_fds();
    const std::size_t mappings_before = mappings();
    const pmr::detail::ArenaUsage arena_before = pmr::detail::arena_usage();

    auto start = std::chrono::steady_clock::now();
    std::vector<pmr::SendWindow<char>> sends;
    std::vector<pmr::RecvWindow<char>> recvs;
    sends.reserve(s.pairs);
    recvs.reserve(s.pairs);
    for (std::size_t i = 0; i < s.pairs; ++i) {
        sends.emplace_back(connections[i % s.connections], s.bytes);
        recvs.emplace_back(connections[i % s.connections], s.bytes);
    }
    const double created = slowest(seconds_since(start));
    start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < s.pairs; ++i) {
        recvs[i].init();
        sends[i].init();
        if (s.bytes > 0) {
            sends[i][0] = static_cast<char>(i);
        }
        sends[i].post();
        recvs[i].post();
    }
    pmr::wait_all(sends.begin(), sends.end());
    pmr::wait_all(recvs.begin(), recvs.end());
    const double used = slowest(seconds_since(start));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < s.pairs; ++i) {
        wrong += s.bytes > 0 && recvs[i][0] != static_cast<char>(i) ? 1 : 0;
    }
    const double pairs = static_cast<double>(s.pairs);
    const double fds = largest((static_cast<double>(open_fds()) - double(fds_before)) / pairs);
    const double maps =
        largest((static_cast<double>(mappings()) - double(mappings_before)) / pairs);
    const pmr::detail::ArenaUsage arena = pmr::detail::arena_usage();
    const double shared = largest(
        (static_cast<double>(arena.block_bytes) - double(arena_before.block_bytes)) / pairs);
    const double reserved =
        largest((static_cast<double>(arena.file_bytes) - double(arena_before.file_bytes)) / pairs);
    MPI_Barrier(MPI_COMM_WORLD);
    start = std::chrono::steady_clock::now();
    sends.clear();
    recvs.clear();
    const double destroyed = slowest(seconds_since(start));
    const double all_wrong = largest(static_cast<double>(wrong));
    if (rank == 0) {
        char line[512];
        out << "pmr-bench windows: " << s.pairs << " pairs of " << s.bytes
            << " B, library-owned, on " << s.connections
            << " connection(s) per rank pair, provider "
            << pmr::to_string(connections.front().provider()) << ", " << size << " ranks\n";
        std::snprintf(line, sizeof line,
                      "  pairs/s: created %.0f, first used %.0f, destroyed %.0f (slowest rank)\n"
                      "  per pair (largest of the ranks, each rank has a send and a receive "
                      "window): %.3f fds, %.3f mappings, %.0f B of shared memory in use, %.0f B "
                      "of memory files\n",
                      pairs / created, pairs / used, pairs / destroyed, fds, maps, shared,
                      reserved);
        out << line;
        if (all_wrong > 0) {
            out << "  WRONG DATA in " << all_wrong << " windows of some rank\n";
        }
    }
    return all_wrong > 0 ? 1 : 0;
}

} // namespace pmr_bench
