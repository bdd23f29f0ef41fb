// SPDX-License-Identifier: MIT
#include "system_info.hpp"

#include <pmr/config.hpp>
#include <pmr/provider.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

namespace pmr_bench {

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, 10, "model name") == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) {
                auto start = line.find_first_not_of(' ', colon + 1);
                return start == std::string::npos ? line.substr(colon + 1) : line.substr(start);
            }
        }
    }
    return "unknown";
}

namespace {

std::string trimmed(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) {
        text.pop_back();
    }
    return text;
}

bool starts_with(const std::string& text, const std::string& prefix) {
    return text.compare(0, prefix.size(), prefix) == 0;
}

/// Variables mpirun sets for its own bookkeeping (job ids, URIs, session directories): they
/// differ in every run and say nothing about the transport.
bool is_launcher_bookkeeping(const std::string& entry) {
    static const char* const internal[] = {"OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix",
                                           "OMPI_MCA_initial_wdir", "OMPI_MCA_shmem_RUNTIME"};
    return std::any_of(std::begin(internal), std::end(internal),
                       [&](const char* prefix) { return starts_with(entry, prefix); });
}

/// Environment variables starting with one of `prefixes`, sorted, as "NAME=value ...".
std::string environment_with(const std::vector<std::string>& prefixes) {
    std::vector<std::string> found;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        std::string entry = *e;
        if (is_launcher_bookkeeping(entry)) {
            continue;
        }
        for (const auto& prefix : prefixes) {
            if (starts_with(entry, prefix)) {
                found.push_back(entry);
            }
        }
    }
    std::sort(found.begin(), found.end());
    std::string joined;
    for (const auto& f : found) {
        joined += (joined.empty() ? "" : " ") + f;
    }
    return joined.empty() ? "(none)" : joined;
}

} // namespace

HeaderLines describe_environment(MPI_Comm comm) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    std::vector<char> names(rank == 0 ? static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME
                                      : 0);
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME,
               MPI_CHAR, 0, comm);

    HeaderLines lines;
    if (rank != 0) {
        return lines;
    }
    std::map<std::string, int> per_host;
    for (int r = 0; r < size; ++r) {
        const char* n = names.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
        per_host[std::string(n, strnlen(n, MPI_MAX_PROCESSOR_NAME))] += 1;
    }
    std::string hosts;
    for (const auto& [host, count] : per_host) {
        hosts += (hosts.empty() ? "" : ", ") + host + " (" + std::to_string(count) + " ranks)";
    }

    char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int library_length = 0;
    MPI_Get_library_version(library, &library_length);
    int major = 0, minor = 0;
    MPI_Get_version(&major, &minor);

    std::time_t now = std::time(nullptr);
    char date[64] = {};
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));

    lines.emplace_back("ranks", std::to_string(size) + " on " + std::to_string(per_host.size()) +
                                    " node(s): " + hosts);
    lines.emplace_back("cpu", cpu_model() + ", " +
                                  std::to_string(std::thread::hardware_concurrency()) +
                                  " logical cores on rank 0's node");
    lines.emplace_back("mpi",
                       trimmed(std::string(library, static_cast<std::size_t>(library_length))) +
                           " (MPI " + std::to_string(major) + "." + std::to_string(minor) + ")");
    lines.emplace_back("mpi transport",
                       environment_with({"OMPI_MCA_", "UCX_", "I_MPI_", "MPICH_"}));
    lines.emplace_back("pmr", std::string(PMR_VERSION_STRING) +
                                  ", providers compiled in: " + pmr::compiled_providers_string());
    lines.emplace_back("pmr environment", environment_with({"PMR_"}));
    lines.emplace_back("date", date);
    return lines;
}

} // namespace pmr_bench
