// SPDX-License-Identifier: MIT
#include "collectives/schedules.hpp"

#include <algorithm>
#include <utility>

namespace pmr::detail::coll {

namespace {

// For a size that is not a power of two: `pow2` = 2^floor(log2 size) ranks take part in the
// doubling, the first 2 * `extra` ranks fold into pairs first (rank 2i into 2i + 1).
struct Fold {
    int pow2 = 1;
    int extra = 0;

    explicit Fold(int size) {
        while (pow2 * 2 <= size) {
            pow2 *= 2;
        }
        extra = size - pow2;
    }
    /// Rank among the pow2 doubling ranks, -1 for a rank that folded away (even, < 2 extra).
    int virtual_of(int rank) const noexcept {
        if (rank < 2 * extra) {
            return rank % 2 == 1 ? rank / 2 : -1;
        }
        return rank - extra;
    }
    int real_of(int virtual_rank) const noexcept {
        return virtual_rank < extra ? 2 * virtual_rank + 1 : virtual_rank + extra;
    }
    /// First original rank whose contribution virtual rank `v` (0 <= v <= pow2) holds after the
    /// fold; slot_of(pow2) is the size. Monotone, so a block of virtual ranks is a block of ranks.
    int first_rank_of(int virtual_rank) const noexcept {
        return virtual_rank < extra ? 2 * virtual_rank : virtual_rank + extra;
    }

    /// The first step of a folding rank (rank < 2 extra): the even rank of a pair hands its
    /// `bytes` at `offset` to the odd one, which applies them with `action`.
    static Step fold_in(int rank, std::size_t offset, std::size_t bytes, Action action) {
        Step step;
        if (rank % 2 == 0) {
            step.sends.push_back({rank + 1, offset, bytes});
        } else {
            step.recvs.push_back({rank - 1, offset, bytes, action});
        }
        return step;
    }
    /// The last step of a folding rank: the odd rank of a pair hands the result, `bytes` from the
    /// start, back to the even one.
    static Step fold_out(int rank, std::size_t bytes) {
        Step step;
        if (rank % 2 == 1) {
            step.sends.push_back({rank - 1, 0, bytes});
        } else {
            step.recvs.push_back({rank + 1, 0, bytes, Action::copy});
        }
        return step;
    }
};

int modulo(long value, int size) noexcept {
    const long m = value % size;
    return static_cast<int>(m < 0 ? m + size : m);
}

/// Steps of a ring allgather of the chunks of `count` elements over `size` ranks in which rank r
/// starts with chunk (r + first_owned) mod size.
void append_ring_allgather(std::vector<Step>& steps, int size, int rank, std::size_t count,
                           std::size_t element_size, int first_owned) {
    const int next = modulo(rank + 1L, size);
    const int prev = modulo(rank - 1L, size);
    for (int s = 0; s + 1 < size; ++s) {
        Step step;
        const int out = modulo(static_cast<long>(rank) + first_owned - s, size);
        const int in = modulo(static_cast<long>(rank) + first_owned - s - 1, size);
        const std::size_t out_begin = chunk_begin(count, size, out);
        const std::size_t out_end = chunk_begin(count, size, out + 1);
        const std::size_t in_begin = chunk_begin(count, size, in);
        const std::size_t in_end = chunk_begin(count, size, in + 1);
        if (out_end > out_begin) {
            step.sends.push_back(
                {next, out_begin * element_size, (out_end - out_begin) * element_size});
        }
        if (in_end > in_begin) {
            step.recvs.push_back(
                {prev, in_begin * element_size, (in_end - in_begin) * element_size, Action::copy});
        }
        steps.push_back(std::move(step));
    }
}

struct Range {
    std::size_t begin = 0;
    std::size_t end = 0;

    std::size_t bytes(std::size_t element_size) const noexcept {
        return (end - begin) * element_size;
    }
    std::size_t offset(std::size_t element_size) const noexcept { return begin * element_size; }
};

/// Chunk q of `segment` cut into n chunks.
Range chunk_of(Range segment, int n, int q) noexcept {
    const std::size_t length = segment.end - segment.begin;
    return {segment.begin + chunk_begin(length, n, q),
            segment.begin + chunk_begin(length, n, q + 1)};
}

/// The piece of part `part` that the rank at `c` works on in reduce-scatter phase `phase` (phase 3:
/// the block it owns at the end).
Range trinaryx3_segment(const Grid3& grid, const std::array<int, 3>& c, int part, int phase,
                        std::size_t count) noexcept {
    Range range{chunk_begin(count, 3, part), chunk_begin(count, 3, part + 1)};
    for (int k = 0; k < phase; ++k) {
        const auto d = static_cast<std::size_t>(trinaryx3_dimension(part, k));
        range = chunk_of(range, grid.extents[d], c[d]);
    }
    return range;
}

/// The rank `shift` places up (mod extent) along dimension d from coordinates c.
int along(const Grid3& grid, std::array<int, 3> c, std::size_t d, int shift) noexcept {
    c[d] = modulo(static_cast<long>(c[d]) + shift, grid.extents[d]);
    return grid.rank_of(c);
}

/// The steps of reduce-scatter phase `phase` (0..2) or, with `gather`, of allgather phase
/// `phase` (0..2, over the dimensions in reverse order).
void append_trinaryx3_phase(std::vector<Step>& steps, const Grid3& grid, int rank,
                            std::size_t count, std::size_t element_size, int phase, bool gather) {
    const std::array<int, 3>& c = grid.coords[static_cast<std::size_t>(rank)];
    // The reduce-scatter phase whose split this phase works on.
    const int split = gather ? 2 - phase : phase;
    int length = 0;
    for (int part = 0; part < 3; ++part) {
        length = std::max(
            length, grid.extents[static_cast<std::size_t>(trinaryx3_dimension(part, split))] - 1);
    }
    for (int s = 0; s < length; ++s) {
        Step step;
        for (int part = 0; part < 3; ++part) {
            const auto d = static_cast<std::size_t>(trinaryx3_dimension(part, split));
            const int n = grid.extents[d];
            if (s + 1 >= n) {
                continue;
            }
            const Range segment = trinaryx3_segment(grid, c, part, split, count);
            // Reduce-scatter: chunk q travels q + 1, ..., q and ends at coordinate q. Allgather:
            // the owner of chunk q passes it on to q + 1, ..., q - 1.
            const int back = gather ? 0 : 1;
            const Range out = chunk_of(segment, n, modulo(static_cast<long>(c[d]) - s - back, n));
            const Range in =
                chunk_of(segment, n, modulo(static_cast<long>(c[d]) - s - back - 1, n));
            if (out.end > out.begin) {
                step.sends.push_back({along(grid, c, d, 1), out.offset(element_size),
                                      out.bytes(element_size), part});
            }
            if (in.end > in.begin) {
                step.recvs.push_back({along(grid, c, d, -1), in.offset(element_size),
                                      in.bytes(element_size),
                                      gather ? Action::copy : Action::reduce_lower});
            }
        }
        steps.push_back(std::move(step));
    }
}

} // namespace

std::array<std::size_t, 2> trinaryx3_block(const Grid3& grid, int rank, int part,
                                           std::size_t count) {
    const Range block =
        trinaryx3_segment(grid, grid.coords[static_cast<std::size_t>(rank)], part, 3, count);
    return {block.begin, block.end};
}

std::vector<Step> trinaryx3_allreduce(const Grid3& grid, int rank, std::size_t count,
                                      std::size_t element_size) {
    std::vector<Step> steps;
    if (grid.coords.size() == 1 || count == 0) {
        return steps;
    }
    for (int phase = 0; phase < 3; ++phase) {
        append_trinaryx3_phase(steps, grid, rank, count, element_size, phase, false);
    }
    for (int phase = 0; phase < 3; ++phase) {
        append_trinaryx3_phase(steps, grid, rank, count, element_size, phase, true);
    }
    return steps;
}

std::vector<Step> trinaryx3_rank_order(const Grid3& grid, int rank, std::size_t count,
                                       std::size_t element_size) {
    std::vector<Step> steps;
    const int size = static_cast<int>(grid.coords.size());
    if (size == 1 || count == 0) {
        return steps;
    }
    Step scatter;
    scatter.finish = true;
    for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) {
            continue;
        }
        for (int part = 0; part < 3; ++part) {
            const auto theirs = trinaryx3_block(grid, peer, part, count);
            const auto mine = trinaryx3_block(grid, rank, part, count);
            if (theirs[1] > theirs[0]) {
                scatter.sends.push_back(
                    {peer, theirs[0] * element_size, (theirs[1] - theirs[0]) * element_size, part});
            }
            if (mine[1] > mine[0]) {
                scatter.recvs.push_back({peer, mine[0] * element_size,
                                         (mine[1] - mine[0]) * element_size, Action::keep});
            }
        }
    }
    steps.push_back(std::move(scatter));
    for (int phase = 0; phase < 3; ++phase) {
        append_trinaryx3_phase(steps, grid, rank, count, element_size, phase, true);
    }
    return steps;
}

std::size_t chunk_begin(std::size_t count, int parts, int chunk) noexcept {
    const auto n = static_cast<std::size_t>(parts);
    const auto c = static_cast<std::size_t>(chunk);
    const std::size_t base = count / n;
    const std::size_t larger = count % n;
    return c * base + (c < larger ? c : larger);
}

std::vector<Step> recursive_doubling_allreduce(int size, int rank, std::size_t count,
                                               std::size_t element_size) {
    std::vector<Step> steps;
    if (size == 1 || count == 0) {
        return steps;
    }
    const std::size_t bytes = count * element_size;
    const Fold fold(size);
    const bool folding = rank < 2 * fold.extra;
    if (folding) {
        steps.push_back(Fold::fold_in(rank, 0, bytes, Action::reduce_lower));
    }
    const int v = fold.virtual_of(rank);
    if (v >= 0) {
        for (int mask = 1; mask < fold.pow2; mask *= 2) {
            const int partner_v = v ^ mask;
            const int partner = fold.real_of(partner_v);
            Step step;
            step.sends.push_back({partner, 0, bytes});
            step.recvs.push_back(
                {partner, 0, bytes, partner_v < v ? Action::reduce_lower : Action::reduce_upper});
            steps.push_back(std::move(step));
        }
    }
    if (folding) {
        steps.push_back(Fold::fold_out(rank, bytes));
    }
    return steps;
}

std::vector<Step> ring_allreduce(int size, int rank, std::size_t count, std::size_t element_size) {
    std::vector<Step> steps;
    if (size == 1 || count == 0) {
        return steps;
    }
    const int next = modulo(rank + 1L, size);
    const int prev = modulo(rank - 1L, size);
    for (int s = 0; s + 1 < size; ++s) {
        Step step;
        const int out = modulo(static_cast<long>(rank) - s, size);
        const int in = modulo(static_cast<long>(rank) - s - 1, size);
        const std::size_t out_begin = chunk_begin(count, size, out);
        const std::size_t out_end = chunk_begin(count, size, out + 1);
        const std::size_t in_begin = chunk_begin(count, size, in);
        const std::size_t in_end = chunk_begin(count, size, in + 1);
        if (out_end > out_begin) {
            step.sends.push_back(
                {next, out_begin * element_size, (out_end - out_begin) * element_size});
        }
        if (in_end > in_begin) {
            // The partial sum arriving holds the ranks before this one in the chunk's chain.
            step.recvs.push_back({prev, in_begin * element_size, (in_end - in_begin) * element_size,
                                  Action::reduce_lower});
        }
        steps.push_back(std::move(step));
    }
    // Rank r now holds the complete chunk r + 1.
    append_ring_allgather(steps, size, rank, count, element_size, 1);
    return steps;
}

std::vector<Step> direct_reduce_scatter_allgather(int size, int rank, std::size_t count,
                                                  std::size_t element_size) {
    std::vector<Step> steps;
    if (size == 1 || count == 0) {
        return steps;
    }
    Step scatter;
    scatter.finish = true;
    const std::size_t own_begin = chunk_begin(count, size, rank);
    const std::size_t own_end = chunk_begin(count, size, rank + 1);
    for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) {
            continue;
        }
        const std::size_t begin = chunk_begin(count, size, peer);
        const std::size_t end = chunk_begin(count, size, peer + 1);
        if (end > begin) {
            scatter.sends.push_back({peer, begin * element_size, (end - begin) * element_size});
        }
        if (own_end > own_begin) {
            scatter.recvs.push_back({peer, own_begin * element_size,
                                     (own_end - own_begin) * element_size, Action::keep});
        }
    }
    steps.push_back(std::move(scatter));
    append_ring_allgather(steps, size, rank, count, element_size, 0);
    return steps;
}

std::vector<Step> direct_allreduce(int size, int rank, std::size_t count, std::size_t element_size,
                                   bool whole) {
    std::vector<Step> steps;
    if (size == 1 || count == 0) {
        return steps;
    }
    if (whole) {
        const std::size_t bytes = count * element_size;
        Step step;
        step.finish = true;
        step.after_sends = true;
        for (int peer = 0; peer < size; ++peer) {
            if (peer != rank) {
                step.sends.push_back({peer, 0, bytes, any_lane, true});
                step.recvs.push_back({peer, 0, bytes, Action::keep});
            }
        }
        steps.push_back(std::move(step));
        return steps;
    }
    const auto chunk = [&](int c) {
        return Range{chunk_begin(count, size, c), chunk_begin(count, size, c + 1)};
    };
    const Range own = chunk(rank);
    Step scatter;
    scatter.finish = true;
    Step gather;
    for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) {
            continue;
        }
        const Range theirs = chunk(peer);
        if (theirs.end > theirs.begin) {
            scatter.sends.push_back(
                {peer, theirs.offset(element_size), theirs.bytes(element_size), any_lane, true});
            gather.recvs.push_back({peer, theirs.offset(element_size), theirs.bytes(element_size),
                                    Action::copy, true});
        }
        if (own.end > own.begin) {
            scatter.recvs.push_back(
                {peer, own.offset(element_size), own.bytes(element_size), Action::keep});
            gather.sends.push_back(
                {peer, own.offset(element_size), own.bytes(element_size), any_lane, true});
        }
    }
    steps.push_back(std::move(scatter));
    steps.push_back(std::move(gather));
    return steps;
}

std::vector<Step> recursive_doubling_allgather(int size, int rank, std::size_t count,
                                               std::size_t element_size) {
    std::vector<Step> steps;
    if (size == 1 || count == 0) {
        return steps;
    }
    const std::size_t slot = count * element_size;
    const Fold fold(size);
    const bool folding = rank < 2 * fold.extra;
    if (folding) {
        // The pair's slot is the even rank's: rank 2i's contribution at 2i * slot.
        const auto even = static_cast<std::size_t>(rank - rank % 2);
        steps.push_back(Fold::fold_in(rank, even * slot, slot, Action::copy));
    }
    auto slots_of = [&](int first_virtual, int virtual_count) {
        const auto begin = static_cast<std::size_t>(fold.first_rank_of(first_virtual));
        const auto end =
            static_cast<std::size_t>(fold.first_rank_of(first_virtual + virtual_count));
        return std::make_pair(begin * slot, (end - begin) * slot);
    };
    const int v = fold.virtual_of(rank);
    if (v >= 0) {
        for (int mask = 1; mask < fold.pow2; mask *= 2) {
            const int partner_v = v ^ mask;
            const int partner = fold.real_of(partner_v);
            const auto mine = slots_of(v & ~(mask - 1), mask);
            const auto theirs = slots_of(partner_v & ~(mask - 1), mask);
            Step step;
            step.sends.push_back({partner, mine.first, mine.second});
            step.recvs.push_back({partner, theirs.first, theirs.second, Action::copy});
            steps.push_back(std::move(step));
        }
    }
    if (folding) {
        steps.push_back(Fold::fold_out(rank, static_cast<std::size_t>(size) * slot));
    }
    return steps;
}

std::vector<Step> ring_allgather(int size, int rank, std::size_t count, std::size_t element_size) {
    std::vector<Step> steps;
    if (size == 1 || count == 0) {
        return steps;
    }
    // Slots are the chunks of size * count elements split into size parts.
    append_ring_allgather(steps, size, rank, count * static_cast<std::size_t>(size), element_size,
                          0);
    return steps;
}

std::vector<Step> binomial_broadcast(int size, int rank, int root, std::size_t count,
                                     std::size_t element_size) {
    std::vector<Step> steps;
    if (size == 1 || count == 0) {
        return steps;
    }
    const std::size_t bytes = count * element_size;
    const int relative = modulo(static_cast<long>(rank) - root, size);
    auto real = [&](int r) { return modulo(static_cast<long>(r) + root, size); };
    for (int mask = 1; mask < size; mask *= 2) {
        Step step;
        if (relative < mask) {
            if (relative + mask < size) {
                step.sends.push_back({real(relative + mask), 0, bytes});
            }
        } else if (relative < 2 * mask) {
            step.recvs.push_back({real(relative - mask), 0, bytes, Action::copy});
        }
        if (!step.sends.empty() || !step.recvs.empty()) {
            steps.push_back(std::move(step));
        }
    }
    return steps;
}

std::vector<Step> dissemination_barrier(int size, int rank) {
    std::vector<Step> steps;
    for (int distance = 1; distance < size; distance *= 2) {
        Step step;
        step.sends.push_back({modulo(static_cast<long>(rank) + distance, size), 0, 1});
        step.recvs.push_back(
            {modulo(static_cast<long>(rank) - distance, size), 0, 1, Action::keep});
        steps.push_back(std::move(step));
    }
    return steps;
}

std::vector<Step> direct_barrier(int size, int rank) {
    std::vector<Step> steps;
    if (size == 1) {
        return steps;
    }
    Step step;
    for (int peer = 0; peer < size; ++peer) {
        if (peer != rank) {
            step.sends.push_back({peer, 0, 1});
            step.recvs.push_back({peer, 0, 1, Action::keep});
        }
    }
    steps.push_back(std::move(step));
    return steps;
}

} // namespace pmr::detail::coll
