// SPDX-License-Identifier: MIT
#include "benchmark.hpp"

#include "pattern.hpp"

#include <algorithm>

namespace pmr_bench {

std::uint64_t Variant::seed(int sender, int channel) const noexcept {
    return pattern_seed(round_, sender, channel);
}

void Variant::fill(void* data, std::size_t bytes, int sender, int channel) const noexcept {
    fill_pattern(data, bytes, seed(sender, channel));
}

void Variant::check(const void* data, std::size_t bytes, int sender, int channel,
                    const std::string& where, int swapped_channel) {
    std::size_t bad = find_mismatch(data, bytes, seed(sender, channel));
    if (bad == bytes) {
        return;
    }
    ++log_.failures;
    if (log_.failures > 1) {
        return;
    }
    log_.first =
        where + ", " + std::to_string(bytes) + " B, round " + std::to_string(round_) + ": ";
    if (swapped_channel >= 0 &&
        find_mismatch(data, bytes, seed(sender, swapped_channel)) == bytes) {
        log_.first += "holds the block sent toward the other direction (blocks swapped)";
    } else if (find_mismatch(data, bytes, pattern_seed(round_ - 1, sender, channel)) == bytes) {
        log_.first += "holds the previous round's data (not delivered or not waited for)";
    } else {
        log_.first += "first wrong byte at offset " + std::to_string(bad);
    }
}

void Variant::report_failure(const std::string& what) {
    ++log_.failures;
    if (log_.failures == 1) {
        log_.first = what + ", round " + std::to_string(round_);
    }
}

bool Context::wants(const std::string& name) const {
    if (name == "pmr-owned" && !owned_windows) {
        return false;
    }
    if (name == "pmr-user" && !user_windows) {
        return false;
    }
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

pmr::Connection Context::connect(const pmr::Target& target) const {
    if (!provider || target.is_null()) {
        return pmr::Connection(target);
    }
    return {target, *provider};
}

namespace {
std::vector<BenchmarkEntry>& registry() {
    static std::vector<BenchmarkEntry> entries;
    return entries;
}
} // namespace

bool register_benchmark(const BenchmarkEntry& entry) noexcept {
    // Out of memory before main: terminating (noexcept) is all that could happen anyway.
    registry().push_back(entry);
    return true;
}

std::vector<BenchmarkEntry> registered_benchmarks() {
    auto entries = registry();
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return std::string(a.name) < b.name; });
    return entries;
}

const BenchmarkEntry* find_benchmark(const std::string& name) {
    for (const auto& entry : registry()) {
        if (name == entry.name) {
            return &entry;
        }
    }
    return nullptr;
}

} // namespace pmr_bench
