// SPDX-License-Identifier: MIT
#include "base/environment.hpp"

#include <pmr/settings.hpp>

#include <cstdio>
#include <string>

namespace pmr::detail {
namespace {

Settings read_settings() {
    namespace reg = pmr::settings;
    Settings s;
    s.timeout_seconds = *reg::duration("PMR_TIMEOUT");
    s.provider = reg::text("PMR_PROVIDER");
    s.spin_microseconds = *reg::duration("PMR_SPIN_US") * 1e6;
    s.spin_fixed = reg::from_environment("PMR_SPIN_US");
    s.warn_after_seconds = *reg::duration("PMR_WARN_AFTER");
    s.shm_cma = *reg::flag("PMR_SHM_CMA");
    s.shm_cma_threshold = *reg::size("PMR_SHM_CMA_THRESHOLD");
    s.shm_chunk = *reg::size("PMR_SHM_CHUNK");
    s.arena_step = *reg::size("PMR_ARENA_STEP");
    s.arena_limit = *reg::size("PMR_ARENA_LIMIT");
    s.stream_threshold = *reg::size("PMR_STREAM_THRESHOLD");
    s.checks = *reg::flag("PMR_CHECKS");
    s.launcher_hints = *reg::flag("PMR_LAUNCHER_HINTS");
    s.debug = *reg::flag("PMR_DEBUG");
    return s;
}

} // namespace

const Settings& settings() {
    static const Settings s = read_settings();
    return s;
}

void debug_log(const std::string& message) {
    if (settings().debug) {
        std::fprintf(stderr, "pmr: %s\n", message.c_str());
    }
}

} // namespace pmr::detail
