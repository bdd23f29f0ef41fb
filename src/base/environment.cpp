// SPDX-License-Identifier: MIT
#include "base/environment.hpp"

#include <pmr/error.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace pmr::detail {
namespace {

const char* variable(const char* name) {
    const char* value = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read once, at start-up
    return (value != nullptr && *value != '\0') ? value : nullptr;
}

double number(const char* name, double fallback) {
    const char* text = variable(name);
    if (text == nullptr) {
        return fallback;
    }
    char* end = nullptr;
    double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || value < 0) {
        throw ArgumentError(std::string("pmr: environment variable ") + name + "='" + text +
                            "' is not a non-negative number. Unset it or give e.g. " + name +
                            "=30.");
    }
    return value;
}

Settings read_settings() {
    Settings s;
    s.timeout_seconds = number("PMR_TIMEOUT", 0.0);
    if (const char* p = variable("PMR_PROVIDER")) {
        s.provider = std::string(p);
    }
    s.spin_microseconds = number("PMR_SPIN_US", s.spin_microseconds);
    s.spin_fixed = variable("PMR_SPIN_US") != nullptr;
    s.warn_after_seconds = number("PMR_WARN_AFTER", s.warn_after_seconds);
    s.shm_cma = number("PMR_SHM_CMA", 1.0) != 0.0;
    s.shm_cma_threshold =
        static_cast<std::size_t>(number("PMR_SHM_CMA_THRESHOLD", double(s.shm_cma_threshold)));
    s.shm_chunk = static_cast<std::size_t>(number("PMR_SHM_CHUNK", double(s.shm_chunk)));
    s.arena_step = static_cast<std::size_t>(number("PMR_ARENA_STEP", double(s.arena_step)));
    s.arena_limit = static_cast<std::size_t>(number("PMR_ARENA_LIMIT", 0.0));
    s.stream_threshold =
        static_cast<std::size_t>(number("PMR_STREAM_THRESHOLD", double(s.stream_threshold)));
#ifdef NDEBUG
    constexpr double checks_default = 0.0;
#else
    constexpr double checks_default = 1.0;
#endif
    s.checks = number("PMR_CHECKS", checks_default) != 0.0;
    s.launcher_hints = number("PMR_LAUNCHER_HINTS", 1.0) != 0.0;
    s.debug = number("PMR_DEBUG", 0.0) != 0.0;
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
