// SPDX-License-Identifier: MIT
// Helpers shared by the multi-rank tests: ranks, byte patterns that name their sender, windows over
// every kind of memory pmr accepts, one exchange round (with wait() or a test() polling loop), and
// Catch2 printing of pmr types.
#pragma once

#include <pmr/pmr.hpp>

#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace Catch {
template <>
struct StringMaker<pmr::Provider> {
    static std::string convert(pmr::Provider provider) {
        return std::string(pmr::to_string(provider));
    }
};
} // namespace Catch

namespace pmr_test {

inline int world_rank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/// The what() of the E that f() throws; fails the test if it throws nothing.
template <class E, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    FAIL("expected exception was not thrown");
    return {};
}

inline int world_size() {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

/// Value of an environment variable, or nothing if unset or empty.
inline std::optional<std::string> environment(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return std::nullopt;
    }
    return std::string(value);
}

/// Sets environment variables for one scope and restores them, in reverse order, at its end.
class ScopedEnvironment {
public:
    ScopedEnvironment() = default;
    ScopedEnvironment(const ScopedEnvironment&) = delete;
    ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;
    ~ScopedEnvironment() {
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
            if (it->second) {
                setenv(it->first.c_str(), it->second->c_str(), 1);
            } else {
                unsetenv(it->first.c_str());
            }
        }
    }
    /// `value` null: unsets `name`.
    void set(const char* name, const char* value) {
        saved_.emplace_back(name, environment(name));
        if (value != nullptr) {
            setenv(name, value, 1);
        } else {
            unsetenv(name);
        }
    }

private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// The compiled providers this host can run: all of them except verbs when the host has no RDMA
/// device (nothing in /sys/class/infiniband), which is then reported once on stderr. The in-process
/// verbs device of tests/verbs_loopback.cpp (PMR_TEST_VERBS_LOOPBACK=1) counts as one.
inline std::vector<pmr::Provider> runnable_providers() {
    static const bool rdma_device = [] {
        if (environment("PMR_TEST_VERBS_LOOPBACK") || environment("PMR_TEST_VERBS_SHARED")) {
            return true;
        }
        std::error_code error;
        return std::filesystem::is_directory("/sys/class/infiniband", error) &&
               !std::filesystem::is_empty("/sys/class/infiniband", error);
    }();
    std::vector<pmr::Provider> providers;
    for (pmr::Provider provider : pmr::compiled_providers()) {
        if (provider == pmr::Provider::verbs && !rdma_device) {
            static const bool reported = [] {
                std::cerr << "pmr tests: verbs is compiled in but this host has no RDMA device: "
                             "skipping it in the tests over every provider\n";
                return true;
            }();
            (void)reported;
            continue;
        }
        providers.push_back(provider);
    }
    return providers;
}

/// Checks the provider a connection settled on: null and self by target, otherwise an inter-process
/// provider of this build, and the one named by PMR_PROVIDER if that is set.
inline void check_provider(pmr::Connection& connection) {
    const pmr::Provider provider = connection.provider();
    INFO(connection.describe());
    if (connection.target().is_null()) {
        CHECK(provider == pmr::Provider::null);
    } else if (connection.target().is_self()) {
        CHECK(provider == pmr::Provider::self);
    } else {
        CHECK(provider != pmr::Provider::null);
        CHECK(provider != pmr::Provider::self);
        CHECK(pmr::is_compiled(provider));
        if (auto forced = environment("PMR_PROVIDER")) {
            CHECK(std::string(pmr::to_string(provider)) == *forced);
        }
    }
}

/// Called first in every test case: a rank that left the previous test case early (after a failure)
/// waits here for the others instead of running into them one test case later.
inline void start_together() {
    MPI_Barrier(MPI_COMM_WORLD);
}

/// Runs `step` unless an earlier step of this rank failed (`ok` false). An exception, or a failed
/// REQUIRE, fails the test and ends only this step, so that the rank still joins the collective MPI
/// calls the test case makes between steps; its peers run into Timeout or PeerLost meanwhile.
/// Returns `ok`.
template <class Step>
bool guarded(bool& ok, Step&& step) {
    if (!ok) {
        return false;
    }
    try {
        step();
    } catch (const std::exception& error) {
        FAIL_CHECK("exception: " << error.what());
        ok = false;
    } catch (...) {
        // A failed REQUIRE: Catch2 has recorded it already.
        ok = false;
    }
    return ok;
}

// -------------------------------------------------------------------------------------------------
// Byte patterns. Byte j of the pattern of `seed` is byte j % 8 of mix(seed + j / 8); the seed
// hashes everything that identifies one message (sender, connection, window, iteration), so a
// message that arrives in the wrong window, from the wrong rank or from another iteration does not
// match.
// -------------------------------------------------------------------------------------------------

constexpr std::uint64_t mix(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31U);
}

/// Seed of the message identified by `parts`.
inline std::uint64_t seed_of(std::initializer_list<std::uint64_t> parts) noexcept {
    std::uint64_t hash = 0x706d72ULL;
    for (std::uint64_t part : parts) {
        hash = mix(hash ^ part);
    }
    return hash;
}

/// Writes bytes [begin, end) of the pattern of `seed` to the same positions of `data`.
inline void fill_pattern(void* data, std::size_t begin, std::size_t end, std::uint64_t seed) {
    auto* bytes = static_cast<unsigned char*>(data);
    for (std::size_t j = begin; j < end;) {
        const std::uint64_t word = mix(seed + j / 8);
        const std::size_t offset = j % 8;
        const std::size_t count = std::min<std::size_t>(8 - offset, end - j);
        std::memcpy(bytes + j, reinterpret_cast<const unsigned char*>(&word) + offset, count);
        j += count;
    }
}

inline void fill_pattern(void* data, std::size_t bytes, std::uint64_t seed) {
    fill_pattern(data, 0, bytes, seed);
}

struct Mismatch {
    std::size_t count = 0; ///< differing bytes
    std::size_t first = 0; ///< position of the first one
    unsigned expected = 0;
    unsigned actual = 0;
};

/// Compares bytes [begin, end) of `data` with the pattern of `seed`.
inline Mismatch compare_pattern(const void* data, std::size_t begin, std::size_t end,
                                std::uint64_t seed) {
    Mismatch result;
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t j = begin; j < end;) {
        const std::uint64_t word = mix(seed + j / 8);
        const auto* expected = reinterpret_cast<const unsigned char*>(&word);
        const std::size_t offset = j % 8;
        const std::size_t count = std::min<std::size_t>(8 - offset, end - j);
        if (std::memcmp(bytes + j, expected + offset, count) != 0) {
            for (std::size_t i = 0; i < count; ++i) {
                if (bytes[j + i] != expected[offset + i]) {
                    if (result.count == 0) {
                        result.first = j + i;
                        result.expected = expected[offset + i];
                        result.actual = bytes[j + i];
                    }
                    ++result.count;
                }
            }
        }
        j += count;
    }
    return result;
}

/// One Catch2 check that bytes [begin, end) of `data` hold the pattern of `seed`; on failure the
/// message names `what` and the first differing byte. Returns whether they do.
inline bool check_pattern(const void* data, std::size_t begin, std::size_t end, std::uint64_t seed,
                          const std::string& what) {
    const Mismatch mismatch = compare_pattern(data, begin, end, seed);
    if (mismatch.count != 0) {
        FAIL_CHECK(what << ": " << mismatch.count << " of " << (end - begin) << " bytes in ["
                        << begin << ", " << end << ") differ, first at byte " << mismatch.first
                        << " (expected " << mismatch.expected << ", got " << mismatch.actual
                        << ")");
        return false;
    }
    return true;
}

// -------------------------------------------------------------------------------------------------
// Windows over every kind of memory.
// -------------------------------------------------------------------------------------------------

enum class Memory {
    owned,       ///< library-owned window memory
    user,        ///< std::vector<T>
    pmr_pointer, ///< pmr::allocate<T>()
    pmr_vector,  ///< std::vector<T, pmr::Allocator<T>>
};

constexpr std::array<Memory, 4> all_memory = {Memory::owned, Memory::user, Memory::pmr_pointer,
                                              Memory::pmr_vector};

inline const char* to_string(Memory memory) noexcept {
    switch (memory) {
    case Memory::owned:
        return "library-owned";
    case Memory::user:
        return "std::vector";
    case Memory::pmr_pointer:
        return "pmr::allocate";
    case Memory::pmr_vector:
        return "std::vector<T, pmr::Allocator<T>>";
    }
    return "?";
}

template <class T>
struct PmrDelete {
    void operator()(T* pointer) const noexcept { pmr::deallocate(pointer); }
};

/// A window together with the user buffer under it (none if library-owned). The buffer is declared
/// first so that it outlives the window.
template <class Window>
class Buffered {
public:
    using value_type = typename Window::value_type;

    Buffered(const pmr::Connection& connection, Memory memory, std::size_t count)
        : memory_(memory), storage_(memory, count),
          window_(memory == Memory::owned ? Window(connection, count)
                                          : Window(connection, storage_.data, count)) {}

    Window& operator*() noexcept { return window_; }
    const Window& operator*() const noexcept { return window_; }
    Window* operator->() noexcept { return &window_; }
    const Window* operator->() const noexcept { return &window_; }
    Memory memory() const noexcept { return memory_; }
    /// The user buffer, nullptr for library-owned windows.
    value_type* user_data() const noexcept { return storage_.data; }

    /// Checks what a fresh window promises about its memory.
    void check_fresh() const {
        INFO(window_.describe() << " over " << to_string(memory_));
        CHECK(window_.bytes() == window_.size() * sizeof(value_type));
        CHECK(window_.empty() == (window_.size() == 0));
        CHECK(window_.end() - window_.begin() == static_cast<std::ptrdiff_t>(window_.size()));
        if (memory_ == Memory::owned) {
            CHECK(window_.owns_memory());
            if (!window_.empty()) {
                CHECK(pmr::is_pmr_memory(window_.data(), window_.bytes()));
                const auto* bytes = reinterpret_cast<const unsigned char*>(window_.data());
                CHECK(std::all_of(bytes, bytes + window_.bytes(),
                                  [](unsigned char b) { return b == 0; }));
            }
        } else {
            CHECK_FALSE(window_.owns_memory());
            CHECK(window_.data() == storage_.data);
            if (!window_.empty()) {
                CHECK(pmr::is_pmr_memory(window_.data(), window_.bytes()) ==
                      (memory_ != Memory::user));
            }
        }
    }

private:
    struct Storage {
        Storage(Memory memory, std::size_t count) {
            switch (memory) {
            case Memory::owned:
                break;
            case Memory::user:
                plain.resize(count);
                data = plain.data();
                break;
            case Memory::pmr_pointer:
                // At least one element: what pmr::allocate(0) returns is not the subject here.
                pointer.reset(pmr::allocate<value_type>(std::max<std::size_t>(count, 1)));
                data = pointer.get();
                break;
            case Memory::pmr_vector:
                shared.resize(count);
                data = shared.data();
                break;
            }
        }
        std::vector<value_type> plain;
        std::vector<value_type, pmr::Allocator<value_type>> shared;
        std::unique_ptr<value_type, PmrDelete<value_type>> pointer;
        value_type* data = nullptr;
    };

    Memory memory_;
    Storage storage_;
    Window window_;
};

template <class T>
using BufferedSend = Buffered<pmr::SendWindow<T>>;
template <class T>
using BufferedRecv = Buffered<pmr::RecvWindow<T>>;

// -------------------------------------------------------------------------------------------------
// One round on many windows.
// -------------------------------------------------------------------------------------------------

enum class Completion { wait, test };

inline const char* to_string(Completion completion) noexcept {
    return completion == Completion::wait ? "wait()" : "test() polling";
}

/// Seconds a test() polling loop may run before the test gives up: beyond PMR_TIMEOUT, so that a
/// library deadline fires first.
inline double polling_limit_seconds() {
    double limit = 120;
    if (auto timeout = environment("PMR_TIMEOUT")) {
        limit = std::atof(timeout->c_str()) + 30;
    }
    return limit;
}

/// Calls test() on `window` until it returns true, and `between()` after every false; throws if
/// that takes longer than polling_limit_seconds().
template <class Window, class Between>
void complete_by_test(Window& window, Between&& between) {
    const auto start = std::chrono::steady_clock::now();
    const double limit = polling_limit_seconds();
    while (!window.test()) {
        between();
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        if (elapsed.count() > limit) {
            throw std::runtime_error("test() polling: " + window.describe() +
                                     " not complete after " + std::to_string(elapsed.count()) +
                                     " s");
        }
        std::this_thread::yield();
    }
}

template <class Window>
void complete_by_test(Window& window) {
    complete_by_test(window, [] {});
}

/// Completes a run of `object` by wait() (`by_test`: one wait(), then test() calls), again after
/// every pmr::Timeout (anything else propagates); returns how many Timeouts it took. For the
/// retry of a wait that timed out. Throws after 20 Timeouts: the run will not complete.
template <class Waitable>
int wait_through_timeouts(Waitable& object, bool by_test = false) {
    int timeouts = 0;
    bool waited = false;
    for (;;) {
        try {
            if (!by_test || !waited) {
                waited = true;
                object.wait();
                return timeouts;
            }
            if (object.test()) {
                return timeouts;
            }
            std::this_thread::yield();
        } catch (const pmr::Timeout&) {
            if (++timeouts == 20) {
                throw;
            }
        }
    }
}

/// One transfer on every window. Every receive is initialised before any send is posted and every
/// send is posted before anything waits, so no order of ranks can deadlock. `post(i, window)` posts
/// the i-th send window.
template <class Sends, class Recvs, class Post>
void exchange(Sends& sends, Recvs& recvs, Completion completion, Post&& post) {
    for (auto& recv : recvs) {
        recv->init();
    }
    for (auto& send : sends) {
        send->init();
    }
    for (std::size_t i = 0; i < sends.size(); ++i) {
        post(i, *sends[i]);
    }
    for (auto& recv : recvs) {
        recv->post();
    }
    if (completion == Completion::wait) {
        for (auto& send : sends) {
            send->wait();
        }
        for (auto& recv : recvs) {
            recv->wait();
        }
        return;
    }
    std::vector<char> sent(sends.size(), 0);
    std::vector<char> received(recvs.size(), 0);
    std::size_t pending = sends.size() + recvs.size();
    const auto start = std::chrono::steady_clock::now();
    const double limit = polling_limit_seconds();
    while (pending > 0) {
        for (std::size_t i = 0; i < sends.size(); ++i) {
            if (sent[i] == 0 && sends[i]->test()) {
                sent[i] = 1;
                --pending;
            }
        }
        for (std::size_t i = 0; i < recvs.size(); ++i) {
            if (received[i] == 0 && recvs[i]->test()) {
                received[i] = 1;
                --pending;
            }
        }
        if (pending > 0) {
            const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
            if (elapsed.count() > limit) {
                throw std::runtime_error("test() polling: " + std::to_string(pending) +
                                         " window(s) not complete after " +
                                         std::to_string(elapsed.count()) + " s");
            }
            std::this_thread::yield();
        }
    }
}

/// One transfer of every whole send window.
template <class Sends, class Recvs>
void exchange(Sends& sends, Recvs& recvs, Completion completion) {
    exchange(sends, recvs, completion, [](std::size_t /*index*/, auto& send) { send.post(); });
}

/// Range-post pieces that tile [0, total): uneven lengths, an empty piece, neighbours on the same
/// rail, and every rail of the connection.
inline std::vector<pmr::RailRange> rail_pieces(std::size_t total, std::size_t rails) {
    std::vector<pmr::RailRange> pieces;
    const std::size_t count = 2 * rails + 1;
    std::size_t offset = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t rest = total - offset;
        std::size_t bytes = i + 1 == count ? rest : rest / (count - i) + (i % 3 == 0 ? 7 : 0);
        bytes = i == 1 ? 0 : std::min(bytes, rest);
        pieces.push_back({offset, bytes, (i / 2) % rails});
        offset += bytes;
    }
    return pieces;
}

} // namespace pmr_test
