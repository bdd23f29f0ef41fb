// SPDX-License-Identifier: MIT
// How pmr waits: spin briefly (the peer is usually a few hundred nanoseconds away), then yield the
// core, and every few milliseconds give the caller a chance to check that the peer is alive and
// that PMR_TIMEOUT has not passed.
//
// Spinning only pays while every rank has a core of its own. With more ranks than cores a spinning
// rank takes the time slice of the peer it waits for, so the spin budget is 0 (yield at once, as
// Open MPI does when oversubscribed) when this node runs more ranks than it has CPUs. When the
// ranks are known to fit (pmr::Communicator or the launcher counted them), waits never yield, as
// MPI's do not: a yield hands the core to whatever else is runnable (a compiler, another job),
// and on a loaded machine each one costs a time slice of milliseconds. While the count is unknown
// the budget adapts at run time: waits whose spin found nothing halve the budget of the next
// waits, waits that complete while spinning double it again, up to PMR_SPIN_US (default 20 us).
// PMR_SPIN_US, when set, fixes the budget whatever the count.
#pragma once

#include "base/environment.hpp"

#include <atomic>
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

/// The process-wide spin budget of waits.
class SpinPolicy {
public:
    /// The budget for the next wait, in nanoseconds.
    std::int64_t budget_ns() const noexcept { return budget_ns_.load(std::memory_order_relaxed); }
    /// A wait spun its whole budget and still had to yield: spin less.
    void futile() noexcept;
    /// A wait completed while spinning: spin more, up to the configured budget.
    void fruitful() noexcept;
    /// This node runs at least `ranks` ranks (learnt at set-up): with more ranks than CPUs, never
    /// spin; with at most as many, never yield.
    void set_ranks_on_node(int ranks) noexcept;
    /// Whether waits currently yield at once because the node is oversubscribed.
    bool oversubscribed() const noexcept { return oversubscribed_.load(std::memory_order_relaxed); }
    /// Whether this node runs more ranks than its CPUs (as far as counted), whatever PMR_SPIN_US
    /// says about waits.
    bool ranks_outnumber_cpus() const noexcept;
    /// Whether waits spin until they complete because every rank here has a CPU.
    bool spin_only() const noexcept { return spin_only_.load(std::memory_order_relaxed); }

    /// The policy of this process; reads PMR_SPIN_US and the launcher's rank count at first use.
    /// @throws ArgumentError for a malformed PMR_SPIN_US.
    static SpinPolicy& instance();

private:
    SpinPolicy();

    std::int64_t ceiling_ns_; ///< PMR_SPIN_US
    bool fixed_;              ///< PMR_SPIN_US was set: no adaptation
    std::atomic<bool> oversubscribed_{false};
    std::atomic<bool> spin_only_{false};
    std::atomic<int> ranks_on_node_{0}; ///< the most ranks any count found here
    std::atomic<std::int64_t> budget_ns_{0};
};

/// Polls before a wait settles into Backoff, which reads the clock.
inline constexpr int brief_polls = 64;

/// Calls poll() up to brief_polls times, with a pause between polls, while waits spin (never when
/// this node runs more ranks than CPUs: there the peer needs this core); true as soon as poll()
/// is. A small message waits for one cache line from another core, and a clock read costs about
/// as much as that transfer (36 ns against 34 ns for a line each way on the 2-core test machine):
/// the first clock read of a Backoff then waits for waits that are long. The pause stays: polling
/// back to back kept the line from its writer (48 ns per exchange without it).
template <class Poll>
bool poll_briefly(Poll&& poll) {
    if (SpinPolicy::instance().budget_ns() == 0) {
        return false;
    }
    for (int i = 0; i < brief_polls; ++i) {
        if (poll()) {
            return true;
        }
        cpu_relax();
    }
    return false;
}

class Backoff {
public:
    using Clock = std::chrono::steady_clock;

    /// @throws ArgumentError for malformed PMR_* variables (read at the first wait).
    Backoff()
        : policy_(SpinPolicy::instance()), start_(Clock::now()),
          spin_until_(start_ + std::chrono::nanoseconds(policy_.budget_ns())),
          next_check_(start_ + check_interval), yielding_(policy_.budget_ns() == 0),
          spin_only_(policy_.spin_only()) {}
    Backoff(const Backoff&) = delete;
    Backoff& operator=(const Backoff&) = delete;

    /// Tells the policy how the spin went: a wait that yielded after spinning found it futile.
    ~Backoff() {
        if (spun_out_) {
            policy_.futile();
        } else if (!yielding_) {
            policy_.fruitful();
        }
    }

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
            yielding_ = !spin_only_ && now_ >= spin_until_;
            spun_out_ = yielding_;
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

    SpinPolicy& policy_;
    Clock::time_point start_;
    Clock::time_point spin_until_;
    Clock::time_point next_check_;
    Clock::time_point now_{};
    std::uint64_t polls_ = 0;
    bool yielding_;
    bool spin_only_;
    bool spun_out_ = false;
};

} // namespace pmr::detail
