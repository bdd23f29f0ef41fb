// SPDX-License-Identifier: MIT
// Descriptors, mappings and memory per window: thousands of window pairs under a low limit of open
// files, a long create/use/destroy loop that must stay flat, and the typed error where a limit is
// reached anyway (issue 36). Two ranks on one node.
#include "support.hpp"

#include "base/environment.hpp"
#include "base/shared_memory.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <dirent.h>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <sys/mman.h>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

namespace {

using pmr_test::message_of;
using pmr_test::start_together;
using pmr_test::world_rank;

std::size_t open_fds() {
    std::size_t count = 0;
    DIR* directory = opendir("/proc/self/fd");
    REQUIRE(directory != nullptr);
    while (const dirent* entry = readdir(directory)) {
        if (entry->d_name[0] != '.') {
            ++count;
        }
    }
    closedir(directory);
    return count - 1; // the directory's own descriptor
}

std::size_t mappings() {
    std::ifstream maps("/proc/self/maps");
    std::size_t count = 0;
    std::string line;
    while (std::getline(maps, line)) {
        ++count;
    }
    return count;
}

/// Resident memory in KiB, shared memory of this process included.
std::size_t resident_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) {
            return static_cast<std::size_t>(std::stoul(line.substr(6)));
        }
    }
    FAIL("no VmRSS in /proc/self/status");
    return 0;
}

/// Sets the soft limit of open files for the scope, as `ulimit -n` would before the run.
class FileLimit {
public:
    explicit FileLimit(rlim_t soft) {
        REQUIRE(getrlimit(RLIMIT_NOFILE, &saved_) == 0);
        rlimit lowered = saved_;
        lowered.rlim_cur = std::min(soft, saved_.rlim_max);
        REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    }
    FileLimit(const FileLimit&) = delete;
    FileLimit& operator=(const FileLimit&) = delete;
    ~FileLimit() { setrlimit(RLIMIT_NOFILE, &saved_); }

private:
    rlimit saved_{};
};

/// What f() throws, to be looked at once the limit is lifted: the sanitizers' own checks of an
/// exception object need descriptors too.
template <class F>
std::exception_ptr thrown(F&& f) {
    try {
        f();
    } catch (...) {
        return std::current_exception();
    }
    return nullptr;
}

int peer_rank() {
    return 1 - world_rank();
}

std::uint64_t seed(std::size_t window, std::uint64_t round) {
    return pmr_test::seed_of({static_cast<std::uint64_t>(world_rank()), window, round});
}

std::uint64_t peer_seed(std::size_t window, std::uint64_t round) {
    return pmr_test::seed_of({static_cast<std::uint64_t>(peer_rank()), window, round});
}

constexpr std::size_t pair_bytes = 4096;

/// One round on `send` and `recv` (paired with the peer's recv and send): the first `bytes` bytes
/// of the pattern of (`window`, `round`) each way. Returns whether the peer's arrived intact.
bool round_checked(pmr::SendWindow<char>& send, pmr::RecvWindow<char>& recv, std::size_t bytes,
                   std::size_t window, std::uint64_t round) {
    recv.init();
    send.init();
    pmr_test::fill_pattern(send.data(), bytes, seed(window, round));
    send.post(pmr::Elements{bytes});
    recv.post();
    pmr::wait_all(send, recv);
    return pmr_test::check_pattern(recv.data(), 0, bytes, peer_seed(window, round), "window");
}

/// `pairs` window pairs of 4 KiB over `connections` connections of `provider` to the other rank,
/// every fourth receive window on a user buffer (control block with a staging area), all used
/// twice and checked.
void many_pairs(std::size_t pairs, std::size_t connection_count, pmr::Provider provider) {
    std::vector<pmr::Connection> connections;
    for (std::size_t c = 0; c < connection_count; ++c) {
        connections.emplace_back(
            pmr::Target(MPI_COMM_WORLD, peer_rank(), static_cast<int>(c), static_cast<int>(c)),
            provider);
    }
    // Connections first: their pidfds are per connection, not per window.
    for (auto& connection : connections) {
        pmr::SendWindow<char> send(connection, 8);
        pmr::RecvWindow<char> recv(connection, 8);
        REQUIRE(round_checked(send, recv, 8, 0, 0));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::size_t fds_before = open_fds();
    const std::size_t mappings_before = mappings();
    std::vector<std::vector<char>> user(pairs / 4, std::vector<char>(pair_bytes));
    std::vector<pmr::SendWindow<char>> sends;
    std::vector<pmr::RecvWindow<char>> recvs;
    sends.reserve(pairs);
    recvs.reserve(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
        pmr::Connection& connection = connections[i % connection_count];
        sends.emplace_back(connection, pair_bytes);
        if (i % 4 == 3) {
            recvs.emplace_back(connection, user[i / 4].data(), pair_bytes);
        } else {
            recvs.emplace_back(connection, pair_bytes);
        }
    }
    for (std::uint64_t round = 0; round < 2; ++round) {
        for (std::size_t i = 0; i < pairs; ++i) {
            recvs[i].init();
            sends[i].init();
            pmr_test::fill_pattern(sends[i].data(), pair_bytes, seed(i, round));
            sends[i].post();
            recvs[i].post();
        }
        pmr::wait_all(sends.begin(), sends.end());
        pmr::wait_all(recvs.begin(), recvs.end());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < pairs; ++i) {
            if (!pmr_test::check_pattern(recvs[i].data(), 0, pair_bytes, peer_seed(i, round),
                                         "window")) {
                ++wrong;
            }
        }
        REQUIRE(wrong == 0);
    }
    const std::size_t fds = open_fds() - fds_before;
    const std::size_t maps = mappings() - mappings_before;
    INFO(pairs << " pairs on " << connection_count << " connections: +" << fds << " fds, +" << maps
               << " mappings");
    CHECK(static_cast<double>(fds) < 0.1 * static_cast<double>(pairs));
    CHECK(maps <= pairs);
    // Tighter than the issue asks: a few arena segments and their mappings on each side (and what
    // the C++ runtime or a sanitizer maps meanwhile; ASan took 20).
    CHECK(fds <= 4);
    CHECK(maps <= 64);
    MPI_Barrier(MPI_COMM_WORLD);
}

} // namespace

TEST_CASE("2000 shm window pairs under a limit of 1024 open files", "[resources]") {
    start_together();
    const FileLimit limit(1024);
    SECTION("on one connection") {
        many_pairs(2000, 1, pmr::Provider::shm);
    }
    SECTION("on 40 connections") {
        many_pairs(2000, 40, pmr::Provider::shm);
    }
}

#if PMR_WITH_UCX
TEST_CASE("2000 ucx window pairs under a limit of 1024 open files", "[resources][ucx]") {
    start_together();
    const FileLimit limit(1024);
    SECTION("on one connection") {
        many_pairs(2000, 1, pmr::Provider::ucx);
    }
    SECTION("on 40 connections") {
        many_pairs(2000, 40, pmr::Provider::ucx);
    }
}
#endif

// 4,000 windows by default; the registration labelled soak runs 100,000
// (PMR_TEST_LOOP_WINDOWS). Each window costs a set-up message, which bounds the pace.
namespace {

void create_use_destroy(pmr::Provider provider) {
    start_together();
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, peer_rank(), 7, 7), provider);
    std::vector<char> user(pair_bytes);
    const std::size_t windows =
        std::stoul(pmr_test::environment("PMR_TEST_LOOP_WINDOWS").value_or("4000"));
    const std::size_t pairs = windows / 2; // a send and a receive window each
    const std::size_t warm_up = pairs / 5;
    REQUIRE(warm_up > 0);
    std::size_t fds = 0;
    std::size_t maps = 0;
    std::size_t rss = 0;
    pmr::detail::ArenaUsage usage;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < pairs; ++i) {
        if (i == warm_up) {
            fds = open_fds();
            maps = mappings();
            rss = resident_kib();
            usage = pmr::detail::arena_usage();
        }
        const bool user_buffer = i % 3 == 2;
        pmr::SendWindow<char> send(connection, pair_bytes);
        pmr::RecvWindow<char> recv =
            user_buffer ? pmr::RecvWindow<char>(connection, user.data(), pair_bytes)
                        : pmr::RecvWindow<char>(connection, pair_bytes);
        if (!round_checked(send, recv, 64, i, 0)) {
            ++wrong;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD); // the peer's windows are gone too
    CHECK(wrong == 0);
    const std::size_t rss_after = resident_kib();
    const pmr::detail::ArenaUsage usage_after = pmr::detail::arena_usage();
    INFO("provider " << static_cast<int>(provider) << ": fds " << fds << " -> " << open_fds()
                     << ", mappings " << maps << " -> " << mappings() << ", RSS " << rss << " -> "
                     << rss_after << " KiB, arena blocks " << usage.blocks << " -> "
                     << usage_after.blocks << ", held " << usage_after.held);
    CHECK(open_fds() <= fds);
    CHECK(mappings() <= maps + 2);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizers keep freed memory in quarantine: the optimised build checks resident memory.
    WARN("resident memory not checked in a sanitizer build");
#else
    CHECK(rss_after <= rss + 4096);
#endif
    CHECK(usage_after.segments == usage.segments);
    // No hold is left: a receive window holds its blocks only for a sender that maps them (ucx:
    // it mapped the sender's credit cell), such a sender writes its close word when its window
    // goes, both sides' windows went before the barrier, and arena_usage() settles holds first.
    // The shm loop used to leave one hold now and then under load: a pass over the holds could
    // release the control block before the buffer held on the same close word ("holds on two
    // blocks that share one close word end together" below).
    CHECK(usage_after.held <= usage.held);
    const std::size_t added = usage_after.held > usage.held ? usage_after.held - usage.held : 0;
    CHECK(usage_after.blocks <= usage.blocks + added);
}

} // namespace

TEST_CASE("a create/use/destroy loop of shm windows stays flat", "[resources][loop]") {
    create_use_destroy(pmr::Provider::shm);
}

#if PMR_WITH_UCX
TEST_CASE("a create/use/destroy loop of ucx windows stays flat", "[resources][loop][ucx]") {
    create_use_destroy(pmr::Provider::ucx);
}
#endif

TEST_CASE("a receive window destroyed while its sender is attached keeps its blocks",
          "[resources]") {
    start_together();
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, peer_rank(), 8, 8), pmr::Provider::shm);
    const pmr::detail::ArenaUsage before = pmr::detail::arena_usage();
    {
        pmr::SendWindow<char> send(connection, 256);
        std::optional<pmr::RecvWindow<char>> recv(std::in_place, connection, 256);
        CHECK(round_checked(send, *recv, 256, 1, 1));
        // Both receive windows go first; the senders stay attached until the barrier.
        const void* buffer = recv->data();
        recv.reset();
        MPI_Barrier(MPI_COMM_WORLD);
        const pmr::detail::ArenaUsage held = pmr::detail::arena_usage();
        CHECK(held.held == before.held + 2); // control block and the library-owned buffer
        // The held blocks are not handed out again while the peer may still write.
        std::vector<void*> others;
        for (int i = 0; i < 8; ++i) {
            others.push_back(pmr::allocate_bytes(256));
            CHECK(others.back() != buffer);
        }
        for (void* other : others) {
            pmr::deallocate_bytes(other);
        }
        CHECK(pmr::detail::arena_usage().held == before.held + 2);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD); // both senders closed
    const pmr::detail::ArenaUsage after = pmr::detail::arena_usage();
    CHECK(after.held <= before.held);
    CHECK(after.blocks <= before.blocks);
}

TEST_CASE("a tiny limit of open files gives a ResourceError and leaves nothing behind",
          "[resources]") {
    start_together();
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, peer_rank(), 9, 9), pmr::Provider::shm);
    const std::size_t fds = open_fds();
    const pmr::detail::ArenaUsage before = pmr::detail::arena_usage();
    // Larger than a quarter of an arena step: a memory file of its own, which needs a descriptor.
    const std::size_t large = pmr::detail::settings().arena_step / 2;
    std::exception_ptr error;
    const int lowest_free = dup(0);
    REQUIRE(lowest_free >= 0);
    close(lowest_free);
    {
        // Four free descriptors, eight asked for; the throw comes after they are closed again.
        // Its what() is read here, where descriptors are free: UBSan checks the type of the
        // object of a member call once per type and opens a pipe to do it, which would fail
        // (a false "invalid vptr") under the tighter limit below, where a failing window's
        // withdrawal reads the what() of its ResourceError.
        const FileLimit limit(static_cast<rlim_t>(lowest_free) + 4);
        CHECK_FALSE(message_of<pmr::ResourceError>([] {
                        pmr::detail::require_descriptors(8, "test");
                    }).empty());
        CHECK_NOTHROW(pmr::detail::require_descriptors(2, "test"));
    }
    {
        const FileLimit limit(static_cast<rlim_t>(lowest_free)); // no further descriptor
        error = thrown([&] { pmr::RecvWindow<char> recv(connection, large); });
        // A ProviderError too, for code that catches those.
        CHECK_THROWS_AS(pmr::SendWindow<char>(connection, large), pmr::ProviderError);
        CHECK_THROWS_AS(pmr::allocate_bytes(large), std::bad_alloc);
    }
    const std::string message =
        message_of<pmr::ResourceError>([&] { std::rethrow_exception(error); });
    CHECK(message.find("RLIMIT_NOFILE") != std::string::npos);
    CHECK(message.find("ulimit -n") != std::string::npos);
    CHECK(open_fds() == fds);
    CHECK(pmr::detail::arena_usage().blocks == before.blocks);
    CHECK(pmr::detail::arena_usage().segments == before.segments);
    // The failed windows withdrew their places on both sides: the next pair works.
    pmr::SendWindow<char> send(connection, large);
    pmr::RecvWindow<char> recv(connection, large);
    CHECK(round_checked(send, recv, large, 0, 1));
}

// Registered on its own with PMR_ARENA_LIMIT=1 MiB and PMR_ARENA_STEP=256 KiB.
TEST_CASE("a full arena gives a ResourceError naming PMR_ARENA_LIMIT on both sides",
          "[arena-limit]") {
    start_together();
    REQUIRE(pmr::detail::settings().arena_limit == std::size_t{1} << 20);
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, peer_rank(), 10, 10),
                               pmr::Provider::shm);
    const pmr::detail::ArenaUsage before = pmr::detail::arena_usage();
    std::vector<pmr::SendWindow<char>> sends;
    std::string message;
    try {
        for (int i = 0; i < 1000; ++i) {
            sends.emplace_back(connection, 16384);
        }
    } catch (const pmr::ResourceError& e) {
        message = e.what();
    }
    INFO(message);
    CHECK(message.find("PMR_ARENA_LIMIT") != std::string::npos);
    CHECK(sends.size() <= 64); // 1 MiB of 16 KiB blocks
    CHECK(sends.size() >= 32);
    // Both sides reached it at the same window, so the pairs made still pair up.
    unsigned long count = sends.size();
    unsigned long peer_count = 0;
    MPI_Sendrecv(&count, 1, MPI_UNSIGNED_LONG, peer_rank(), 0, &peer_count, 1, MPI_UNSIGNED_LONG,
                 peer_rank(), 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(count == peer_count);
    sends.clear(); // unused: withdrawn
    CHECK(pmr::detail::arena_usage().blocks == before.blocks);
    // Freed space is taken again: a window pair fits now (on a connection of its own, where they
    // are the first windows on both sides).
    pmr::Connection fresh(pmr::Target(MPI_COMM_WORLD, peer_rank(), 11, 11), pmr::Provider::shm);
    pmr::SendWindow<char> send(fresh, 16384);
    pmr::RecvWindow<char> recv(fresh, 16384);
    CHECK(round_checked(send, recv, 16384, 1, 2));
}

#if PMR_WITH_UCX
TEST_CASE("ucx under a tiny limit of open files: a ResourceError, not a crash inside UCX",
          "[resources][ucx]") {
    start_together();
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, peer_rank(), 12, 12),
                               pmr::Provider::ucx);
    {
        pmr::SendWindow<char> send(connection, 64);
        pmr::RecvWindow<char> recv(connection, 64);
        REQUIRE(round_checked(send, recv, 64, 3, 0));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const int lowest_free = dup(0);
    REQUIRE(lowest_free >= 0);
    close(lowest_free);
    // Larger than a quarter of an arena step: a memory file of its own, which needs a descriptor.
    const std::size_t large = pmr::detail::settings().arena_step / 2;
    std::exception_ptr error;
    {
        const FileLimit limit(static_cast<rlim_t>(lowest_free) + 4); // see the shm case
        CHECK_THROWS_AS(pmr::detail::require_descriptors(8, "test"), pmr::ResourceError);
    }
    bool small_pair_worked = false;
    {
        const FileLimit limit(static_cast<rlim_t>(lowest_free)); // no further descriptor
        // Windows in the arena segments registered and mapped already need none.
        error = thrown([&] {
            pmr::SendWindow<char> send(connection, 4096);
            pmr::RecvWindow<char> recv(connection, 4096);
            small_pair_worked = round_checked(send, recv, 4096, 4, 0);
        });
        if (error == nullptr) {
            error = thrown([&] { pmr::RecvWindow<char> recv(connection, large); });
            CHECK_THROWS_AS(pmr::SendWindow<char>(connection, large), pmr::ResourceError);
        }
    }
    CHECK(small_pair_worked);
    const std::string message =
        message_of<pmr::ResourceError>([&] { std::rethrow_exception(error); });
    CHECK(message.find("RLIMIT_NOFILE") != std::string::npos);
    // The failed windows withdrew their places on both sides: the next pair works.
    pmr::SendWindow<char> send(connection, 4096);
    pmr::RecvWindow<char> recv(connection, 4096);
    CHECK(round_checked(send, recv, 4096, 2, 3));
}
#endif

// A limit reached on one side only: rank 1 fails to create its windows #1 (its receive window
// while rank 0's send window already waits in init(), then its send window before rank 0 creates
// the receive window); its constructors withdraw their places with the error, so that rank 0's
// windows fail at once with a ResourceError naming the peer and its limit (not a Timeout after
// PMR_TIMEOUT), and the windows #2 of both sides still pair.
namespace {

/// Runs `make` on rank 1 while a limit holds there: returns what it threw.
using UnderLimit = std::function<std::exception_ptr(const std::function<void()>& make)>;

void one_sided_limit(pmr::Provider provider, int tag, std::size_t bytes, bool user_recv,
                     const UnderLimit& under_limit, const std::string& limit) {
    start_together();
    const double timeout = pmr::detail::settings().timeout_seconds;
    REQUIRE(timeout >= 30); // the registration's 60 s: an error in a few seconds is not a timeout
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, peer_rank(), tag, tag), provider);
    {
        pmr::SendWindow<char> send(connection, 64);
        pmr::RecvWindow<char> recv(connection, 64);
        REQUIRE(round_checked(send, recv, 64, 5, 0));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::size_t fds = open_fds();
    const pmr::detail::ArenaUsage before = pmr::detail::arena_usage();
    std::vector<char> user(bytes);
    auto make_recv = [&] {
        return user_recv ? pmr::RecvWindow<char>(connection, user.data(), bytes)
                         : pmr::RecvWindow<char>(connection, bytes);
    };
    const bool limited = world_rank() == 1;
    std::string own_message;
    std::string peer_messages[2];
    double seconds[2] = {0, 0};
    // Rank 1 fails with its ResourceError; rank 0 gets the peer's at its first init(), timed.
    auto peer_error = [&](auto& window, int which) {
        const auto start = std::chrono::steady_clock::now();
        peer_messages[which] = message_of<pmr::ResourceError>([&] { window.init(); });
        seconds[which] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // Retried calls raise the same error, without waiting.
        CHECK_THROWS_AS(window.init(), pmr::ResourceError);
    };
    if (limited) {
        // Rank 0 waits in init() meanwhile.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const std::exception_ptr error = under_limit([&] { make_recv(); });
        own_message = message_of<pmr::ResourceError>([&] { std::rethrow_exception(error); });
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        pmr::SendWindow<char> send(connection, bytes);
        peer_error(send, 0);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    // The other kind, with the withdrawal there before the window is created.
    if (limited) {
        const std::exception_ptr error =
            under_limit([&] { pmr::SendWindow<char> send(connection, bytes); });
        CHECK(message_of<pmr::ResourceError>([&] { std::rethrow_exception(error); }).find(limit) !=
              std::string::npos);
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // the withdrawal arrives
        pmr::RecvWindow<char> recv = make_recv();
        peer_error(recv, 1);
    }
    if (limited) {
        INFO(own_message);
        CHECK(own_message.find(limit) != std::string::npos);
    } else {
        for (int which = 0; which < 2; ++which) {
            INFO(peer_messages[which] << " (after " << seconds[which] << " s)");
            CHECK(peer_messages[which].find("the peer (rank 1)") != std::string::npos);
            CHECK(peer_messages[which].find(limit) != std::string::npos);
            CHECK(peer_messages[which].find("raise") != std::string::npos);
            CHECK(seconds[which] < 10);
        }
    }
    // The windows #2 of both sides pair, and carry their data.
    {
        pmr::SendWindow<char> send(connection, bytes);
        pmr::RecvWindow<char> recv = make_recv();
        CHECK(round_checked(send, recv, bytes, 6, 1));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Nothing left behind on either side: the failed windows' memory, descriptors and holds
    // (arena_usage() first: it settles the holds of blocks whose sender has closed).
    const pmr::detail::ArenaUsage after = pmr::detail::arena_usage();
    INFO("blocks " << before.blocks << " -> " << after.blocks << ", held " << before.held << " -> "
                   << after.held << ", segments " << before.segments << " -> " << after.segments);
    CHECK(open_fds() == fds);
    CHECK(after.blocks <= before.blocks);
    CHECK(after.held <= before.held);
}

/// Runs `make` with no descriptor free beyond those open now.
std::exception_ptr without_descriptors(const std::function<void()>& make) {
    const int lowest_free = dup(0);
    REQUIRE(lowest_free >= 0);
    close(lowest_free);
    const FileLimit limit(static_cast<rlim_t>(lowest_free));
    return thrown(make);
}

/// Runs `make` with the arena full (PMR_ARENA_LIMIT reached).
std::exception_ptr in_full_arena(const std::function<void()>& make) {
    std::vector<void*> blocks;
    try {
        for (int i = 0; i < 10000; ++i) {
            blocks.push_back(pmr::allocate_bytes(4096));
        }
    } catch (const std::bad_alloc&) { // NOLINT(bugprone-empty-catch): full, as wanted
    }
    std::exception_ptr error = thrown(make);
    for (void* block : blocks) {
        pmr::deallocate_bytes(block);
    }
    return error;
}

} // namespace

TEST_CASE("a limit of open files on one side: the peer's windows get a ResourceError at once",
          "[resources]") {
    one_sided_limit(pmr::Provider::shm, 13, pmr::detail::settings().arena_step / 2, false,
                    without_descriptors, "RLIMIT_NOFILE");
}

#if PMR_WITH_UCX
TEST_CASE("ucx: a limit of open files on one side: the peer's windows get a ResourceError at once",
          "[resources][ucx]") {
    one_sided_limit(pmr::Provider::ucx, 14, pmr::detail::settings().arena_step / 2, false,
                    without_descriptors, "RLIMIT_NOFILE");
}
#endif

// The receive windows are on user buffers: their control block (shm) or inbox (ucx) cannot be had,
// a failure inside the provider, after the window took its place.
TEST_CASE("a full arena on one side: the peer's windows get a ResourceError at once",
          "[arena-limit]") {
    REQUIRE(pmr::detail::settings().arena_limit == std::size_t{1} << 20);
    one_sided_limit(pmr::Provider::shm, 15, 16384, true, in_full_arena, "PMR_ARENA_LIMIT");
}

#if PMR_WITH_UCX
TEST_CASE("ucx: a full arena on one side: the peer's windows get a ResourceError at once",
          "[arena-limit][ucx]") {
    REQUIRE(pmr::detail::settings().arena_limit == std::size_t{1} << 20);
    one_sided_limit(pmr::Provider::ucx, 16, 16384, true, in_full_arena, "PMR_ARENA_LIMIT");
}
#endif

// A receive window holds its buffer and its control block on one close word, in the control
// block. A pass over the holds that read the word before the sender closed (for the buffer, the
// lower block) and after (for the control block) released the control block alone: its pages read
// as zeros again, and the buffer stayed held for as long as the sender's process lived (the shm
// loop's stray hold). Here another thread plays the sender and closes at an arbitrary moment while
// this one settles holds in a loop, as a receiver creating windows does.
TEST_CASE("holds on two blocks that share one close word end together", "[resources]") {
    const pmr::detail::ArenaUsage before = pmr::detail::arena_usage();
    constexpr int attempts = 2000;
    int stray = 0;
    for (int i = 0; i < attempts; ++i) {
        std::byte* buffer = pmr::detail::allocate_shared(4096, "test buffer");
        std::byte* control = pmr::detail::allocate_shared(4096, "test control block");
        auto* closed = new (control) std::atomic<std::uint32_t>(0);
        pmr::detail::hold_shared(buffer, closed, getpid());
        pmr::detail::hold_shared(control, closed, getpid());
        pmr::detail::free_shared(buffer);
        pmr::detail::free_shared(control);
        REQUIRE(pmr::detail::arena_usage().held == before.held + stray + 2);
        std::atomic<bool> stored{false};
        std::thread sender([closed, i, &stored] {
            for (volatile int spin = 0; spin < (i % 64) * 50; spin = spin + 1) {
            }
            closed->store(1, std::memory_order_release);
            stored.store(true, std::memory_order_release);
        });
        while (!stored.load(std::memory_order_acquire)) {
            static_cast<void>(pmr::detail::arena_usage());
        }
        sender.join();
        if (pmr::detail::arena_usage().held > before.held + stray) {
            ++stray; // kept for good: this process is the "sender" and lives on
        }
    }
    INFO(stray << " of " << attempts << " pairs of holds left a block held");
    CHECK(stray == 0);
}

// A freed block reads as zeros when the arena hands it out again, whichever way it was given back:
// small blocks are zeroed in place, larger ones have their pages returned to the system (a hole
// punched in the memory file). Control blocks rely on it: a new window's starts zeroed.
TEST_CASE("a block the arena hands out again reads as zeros", "[resources]") {
    for (const std::size_t bytes : {std::size_t{100}, std::size_t{4096}, std::size_t{64} * 1024,
                                    std::size_t{64} * 1024 + 1, std::size_t{200} * 1024}) {
        INFO(bytes << " B");
        std::byte* first = pmr::detail::allocate_shared(bytes, "test block");
        std::memset(first, 0x5a, bytes);
        pmr::detail::free_shared(first);
        std::byte* second = pmr::detail::allocate_shared(bytes, "test block");
        CHECK(second == first); // first fit: the same place, so the check below means something
        const auto nonzero =
            std::count_if(second, second + bytes, [](std::byte b) { return b != std::byte{0}; });
        CHECK(nonzero == 0);
        pmr::detail::free_shared(second);
    }
}

// The peer memory of a process is shared by all connections to it for as long as one holds it:
// its key is the process's start time (field 22 of /proc/<pid>/stat), which a mapping made
// meanwhile does not change. Keyed by a field that moves with the address space (the virtual
// size, field 23, as it once was), a second connection mapped the peer's segments again.
TEST_CASE("peer memory is shared across a change of the peer's address space", "[resources]") {
    const std::shared_ptr<pmr::detail::PeerMemory> first = pmr::detail::peer_memory(getpid());
    const std::size_t bytes = std::size_t{8} << 20;
    void* more = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(more != MAP_FAILED);
    const std::shared_ptr<pmr::detail::PeerMemory> second = pmr::detail::peer_memory(getpid());
    munmap(more, bytes);
    CHECK(second == first);
}
