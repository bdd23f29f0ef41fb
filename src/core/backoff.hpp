// SPDX-License-Identifier: MIT
// How pmr waits: spin briefly (the peer is usually a few hundred nanoseconds away), then yield the
// core so that more ranks than cores still make progress, and every few milliseconds give the
// caller a chance to check that the peer is alive and that PMR_TIMEOUT has not passed.
#pragma once

#include "core/environment.hpp"

#include <chrono>
#include <cstdint>
#include <sched.h>

namespace pmr::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

class Backoff {
public:
    using Clock = std::chrono::steady_clock;

    Backoff() noexcept
        : start_(Clock::now()),
          spin_until_(start_ + to_duration(settings().spin_microseconds * 1e-6)),
          next_check_(start_ + check_interval) {}

    /// Call after each unsuccessful poll. Returns true when it is time for the slow checks
    /// (peer alive? deadline passed?), about every `check_interval`.
    bool pause() noexcept {
        ++polls_;
        if (!yielding_) {
            cpu_relax();
            if ((polls_ & 63U) != 0) {
                return false;
            }
            now_ = Clock::now();
            yielding_ = now_ >= spin_until_;
        } else {
            sched_yield();
            now_ = Clock::now();
        }
        if (now_ < next_check_) {
            return false;
        }
        next_check_ = now_ + check_interval;
        return true;
    }

    /// Whether PMR_TIMEOUT has passed (as of the last pause() that returned true).
    bool expired() const noexcept {
        const double limit = settings().timeout_seconds;
        return limit > 0 && now_ - start_ >= to_duration(limit);
    }

    double elapsed_seconds() const noexcept {
        return std::chrono::duration<double>(now_ - start_).count();
    }

    static constexpr std::chrono::milliseconds check_interval{10};

private:
    static Clock::duration to_duration(double seconds) noexcept {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    }

    Clock::time_point start_;
    Clock::time_point spin_until_;
    Clock::time_point next_check_;
    Clock::time_point now_{};
    std::uint64_t polls_ = 0;
    bool yielding_ = false;
};

} // namespace pmr::detail
