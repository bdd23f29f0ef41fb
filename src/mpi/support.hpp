// SPDX-License-Identifier: MIT
// What the interposer's source files share: wire constants, hashing and waiting.
#pragma once

#include <pmr/memory.hpp>

#include <mpi.h>

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace pmr::mpi {

inline constexpr int control_tag = 7;
/// A slot round holds the message's total size in its first `header_bytes` and a part of the
/// message from `payload_offset` on: a cache line in, so that the copies into and out of a slot
/// keep the relative alignment of cache-line aligned memory (see pmr::copy_bytes).
inline constexpr std::size_t header_bytes = 8;
inline constexpr std::size_t payload_offset = 64;
// The header of the round that hands a stream back to MPI (a message larger than its slots):
// every later message of the stream goes through MPI.
inline constexpr std::uint64_t back_to_mpi = ~std::uint64_t{0};
inline constexpr std::uint64_t world_id = 1;
// Streams followed per communicator and direction (carried or not).
inline constexpr std::size_t followed_streams = 4096;

/// Whether a sender looks for proposals before its next MPI message on a stream that has sent
/// `sent` through MPI: each look is a progress of MPI's own (with the UCX PML, about as long as
/// a small message), so the first 64 sends look, then every 16th, and after 4,096 every 256th.
inline bool look_due(std::uint64_t sent) noexcept {
    return sent < 64 || sent % (sent < 4096 ? 16 : 256) == 0;
}

enum Control : std::int64_t { propose_stream = 1, accept_stream = 2, refuse_stream = 3 };

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept {
    // splitmix64 over the pair: child communicators get well-spread identifiers.
    std::uint64_t x = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

template <class Handle>
std::size_t recent_index(Handle handle, std::size_t size) noexcept {
    std::uint64_t x = 0;
    if constexpr (std::is_pointer_v<Handle>) {
        x = reinterpret_cast<std::uintptr_t>(handle) >> 4; // Open MPI: objects on the heap
    } else {
        x = static_cast<std::uint64_t>(static_cast<std::uint32_t>(handle)); // MPICH: integers
    }
    return static_cast<std::size_t>((x ^ (x >> 7) ^ (x >> 13)) % size);
}

inline bool overlaps(int source_a, int tag_a, int source_b, int tag_b) noexcept {
    const bool sources =
        source_a == MPI_ANY_SOURCE || source_b == MPI_ANY_SOURCE || source_a == source_b;
    const bool tags = tag_a == MPI_ANY_TAG || tag_b == MPI_ANY_TAG || tag_a == tag_b;
    return sources && tags;
}

// Whether every rank on this node has a CPU of its own: waits then spin and never yield, as MPI's
// do (a yield hands the core to whatever else is runnable, a time slice of milliseconds on a
// loaded machine); with more ranks than CPUs a spinning rank takes its peer's time slice, so waits
// yield, at every `yield_every`-th look: a yield at every look made the waiting ranks sharing a
// core hand it back and forth in system calls (halo rounds of 4 and 8 ranks on 2 cores 1.5-3 times
// slower than one every 4 looks; one every 32 looks or more was slower again).
inline bool spin_only = false;
inline constexpr unsigned yield_every = 4;

inline void relax(unsigned& spins) {
    ++spins;
    if (spin_only || spins % yield_every != 0) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    sched_yield();
}

/// The blocking form of a non-blocking call: `look(flag)` until it sets flag or fails.
template <class Look>
int block(Look&& look) {
    unsigned spins = 0;
    for (;;) {
        int flag = 0;
        const int rc = look(flag);
        if (rc != MPI_SUCCESS || flag != 0) {
            return rc;
        }
        relax(spins);
    }
}

} // namespace pmr::mpi
