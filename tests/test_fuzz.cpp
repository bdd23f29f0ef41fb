// SPDX-License-Identifier: MIT
// Set-up messages come from another process, which may be buggy, of another version or hostile.
// Mutated messages (bit flips, bytes set to extremes, truncations, extensions, repeated slices)
// are fed to every parser: each either accepts a message whose fields are within what the receiver
// knows, or throws a pmr::Error naming the object -- never reads out of bounds (the suite runs
// under AddressSanitizer in CI), never crashes. Plus the checks that need the real objects: a
// message on pmr's tags that is not pmr's, and a description naming more shared memory than exists.
#include "support.hpp"

#include "base/blob.hpp"
#include "base/node.hpp"
#include "base/shared_memory.hpp"
#include "core/state.hpp"

#include <pmr/config.hpp>

#if PMR_WITH_SHM
#include "providers/shm/shm.hpp"
#endif

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <unistd.h>

using namespace pmr_test;
using pmr::detail::Blob;
using pmr::detail::BlobWriter;

namespace {

/// A small deterministic generator (xorshift64*), so that a failure can be replayed.
class Random {
public:
    explicit Random(std::uint64_t seed) : state_(seed | 1U) {}
    std::uint64_t next() noexcept {
        state_ ^= state_ >> 12U;
        state_ ^= state_ << 25U;
        state_ ^= state_ >> 27U;
        return state_ * 2685821657736338717ULL;
    }
    std::size_t below(std::size_t n) noexcept { return n == 0 ? 0 : next() % n; }

private:
    std::uint64_t state_;
};

Blob mutate(Blob message, Random& random) {
    const std::size_t mutations = 1 + random.below(4);
    for (std::size_t m = 0; m < mutations; ++m) {
        switch (random.below(6)) {
        case 0: // flip a bit
            if (!message.empty()) {
                message[random.below(message.size())] ^=
                    static_cast<std::byte>(1U << random.below(8));
            }
            break;
        case 1: // a random byte
            if (!message.empty()) {
                message[random.below(message.size())] = static_cast<std::byte>(random.next());
            }
            break;
        case 2: // a field at an extreme value
            if (message.size() >= 8) {
                const std::size_t at = random.below(message.size() - 7);
                const std::uint64_t extremes[] = {0, ~std::uint64_t{0}, 0x7fffffffULL,
                                                  0x80000000ULL, 1ULL << 62};
                const std::uint64_t value = extremes[random.below(5)];
                std::memcpy(message.data() + at, &value, random.below(2) == 0 ? 4 : 8);
            }
            break;
        case 3: // truncate
            message.resize(random.below(message.size() + 1));
            break;
        case 4: // extend
            for (std::size_t k = 1 + random.below(16); k > 0; --k) {
                message.push_back(static_cast<std::byte>(random.next()));
            }
            break;
        default: // repeat a slice
            if (!message.empty()) {
                const std::size_t from = random.below(message.size());
                const std::size_t length = 1 + random.below(message.size() - from);
                Blob slice(message.begin() + static_cast<std::ptrdiff_t>(from),
                           message.begin() + static_cast<std::ptrdiff_t>(from + length));
                message.insert(message.begin() +
                                   static_cast<std::ptrdiff_t>(random.below(message.size())),
                               slice.begin(), slice.end());
            }
            break;
        }
    }
    return message;
}

struct Outcome {
    std::size_t accepted = 0;
    std::size_t refused = 0;
};

/// Runs `parse` on `iterations` mutations of `valid`; it returns normally (after checking what it
/// accepted) or throws pmr::Error, whose message must name the place.
Outcome fuzz(const Blob& valid, std::uint64_t seed, std::size_t iterations,
             const std::function<void(const Blob&)>& parse) {
    Random random(seed);
    Outcome outcome;
    parse(valid); // the unmutated message is fine
    for (std::size_t i = 0; i < iterations; ++i) {
        const Blob message = mutate(valid, random);
        try {
            parse(message);
            ++outcome.accepted;
        } catch (const pmr::Error& e) {
            const std::string text = e.what();
            INFO("iteration " << i << ": " << text);
            REQUIRE(text.find("[fuzzed object]") != std::string::npos);
            ++outcome.refused;
        }
    }
    return outcome;
}

constexpr const char* where = "fuzzed object";
constexpr std::size_t iterations = 20000;

} // namespace

TEST_CASE("mutated hellos are refused or within bounds", "[fuzz]") {
    const Blob valid = BlobWriter()
                           .put<std::uint32_t>(2)
                           .put<std::int32_t>(getpid())
                           .put_string(pmr::detail::node_name())
                           .put<std::uint32_t>(pmr::detail::compiled_mask())
                           .put<std::uint8_t>(0)
                           .put<std::int16_t>(static_cast<std::int16_t>(pmr::Provider::shm))
                           .put_bytes(Blob(24, std::byte{7}))
                           .take();
    const Outcome outcome = fuzz(valid, 1, iterations, [](const Blob& message) {
        const pmr::detail::Hello hello = pmr::detail::parse_hello(message, where);
        REQUIRE(hello.pid > 0);
        if (hello.choice) {
            REQUIRE((hello.mask >> static_cast<unsigned>(*hello.choice) & 1U) != 0);
        }
    });
    CHECK(outcome.refused > iterations / 2);
}

TEST_CASE("mutated window descriptions are refused or within bounds", "[fuzz]") {
    const Blob valid = BlobWriter()
                           .put<std::uint64_t>(4096)
                           .put<std::uint64_t>(8)
                           .put<std::uint8_t>(static_cast<std::uint8_t>(pmr::Provider::shm))
                           .put_bytes(Blob(48, std::byte{1}))
                           .take();
    const Outcome outcome = fuzz(valid, 2, iterations, [](const Blob& message) {
        const auto d = pmr::detail::parse_window_description(message, where);
        REQUIRE(d.element_size > 0);
        REQUIRE(d.bytes % d.element_size == 0);
    });
    CHECK(outcome.refused > iterations / 2);
}

#if PMR_WITH_SHM
TEST_CASE("mutated shm descriptions are refused or fit the announced window", "[fuzz]") {
    using pmr::detail::Shm;
    const pid_t peer = getpid();
    for (const bool staged : {true, false}) {
        Shm::Description d{};
        d.pid = peer;
        d.control = {5, 1, 4096, 64 << 20};
        d.buffer = staged ? Shm::Place{-1, 0, 0, 0} : Shm::Place{6, 0, 8192, 1 << 20};
        d.has_staging = staged ? 1 : 0;
        d.generation = 7;
        d.address = 0x7f0000001000ULL;
        d.bytes = 100000;
        const Blob valid = BlobWriter().put(d).take();
        const Outcome outcome = fuzz(valid, staged ? 3 : 4, iterations, [&](const Blob& message) {
            const auto parsed = Shm::parse_description(message, peer, 100000, where);
            REQUIRE(parsed.pid == peer);
            REQUIRE(parsed.bytes == 100000);
            REQUIRE(parsed.control.fd >= 0);
            REQUIRE((parsed.has_staging == 1) == (parsed.buffer.fd < 0));
            REQUIRE(parsed.generation != 0);
        });
        CHECK(outcome.refused > iterations / 2);
    }
    // A forged pid: the sender would write into a process outside the job.
    Shm::Description forged{};
    forged.pid = 1;
    forged.control = {5, 1, 0, 64 << 20};
    forged.buffer = {-1, 0, 0, 0};
    forged.generation = 1;
    forged.has_staging = 1;
    forged.address = 0x1000;
    forged.bytes = 64;
    auto message = message_of<pmr::ProviderError>(
        [&] { Shm::parse_description(BlobWriter().put(forged).take(), peer, 64, where); });
    CHECK(message.find("names process 1") != std::string::npos);
}
#endif

TEST_CASE("a description that names more shared memory than exists is refused", "[fuzz]") {
    using pmr::detail::SharedMapping;
    SharedMapping file = SharedMapping::create(4096, "test");
    auto message = message_of<pmr::ProviderError>(
        [&] { SharedMapping::open(getpid(), file.fd(), 0, 8192, "fuzzed object"); });
    CHECK(message.find("smaller than its description") != std::string::npos);
    CHECK_THROWS_AS(SharedMapping::open(getpid(), file.fd(), 4000, 200, "fuzzed object"),
                    pmr::ProviderError);
    CHECK_NOTHROW(SharedMapping::open(getpid(), file.fd(), 1000, 3096, "fuzzed object"));
}

TEST_CASE("a message on pmr's set-up tags that is not pmr's is reported, not swallowed", "[fuzz]") {
    // The application breaks the tag rule: it sends on a tag above MPI_TAG_UB / 2.
    const int tag = pmr::detail::bootstrap::max_user_tag() + 9;
    const char garbage[] = "not pmr";
    // A send to oneself may block until it is received (MPICH does), so it must not be MPI_Send.
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Isend(garbage, sizeof garbage, MPI_CHAR, world_rank(), tag, MPI_COMM_WORLD, &request);
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 9, 9));
    auto message = message_of<pmr::BootstrapError>([&] { c.establish(); });
    // pmr received the message while reporting it: the send completes.
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    CHECK(message.find("is not a pmr set-up message") != std::string::npos);
    CHECK(message.find("from rank " + std::to_string(world_rank())) != std::string::npos);
}
