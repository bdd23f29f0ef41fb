// SPDX-License-Identifier: MIT
// The plans of the collectives: which rank sends which part of the work buffer to whom, step by
// step. Each function returns the steps of rank `rank` of `size` ranks, in elements of
// `element_size` bytes; steps in which a rank has nothing to do are left out of its list.
#pragma once

#include "collectives/engine.hpp"

#include <array>
#include <cstddef>
#include <vector>

namespace pmr::detail::coll {

/// Element range [begin, end) of chunk `chunk` when `count` elements are split into `parts` chunks
/// whose sizes differ by at most one (the larger ones first).
std::size_t chunk_begin(std::size_t count, int parts, int chunk) noexcept;

/// Recursive-doubling allreduce of `count` elements in place at offset 0. Contributions are
/// always combined as op(lower ranks, upper ranks): a balanced tree over the ranks after the fold
/// of the first 2r ranks (r = size - 2^floor(log2 size)) into pairs (2i, 2i + 1).
std::vector<Step> recursive_doubling_allreduce(int size, int rank, std::size_t count,
                                               std::size_t element_size);

/// Ring allreduce: reduce-scatter in which chunk c is reduced along the chain c, c+1, ..., c-1
/// (mod size), ((x_c op x_{c+1}) op ...) op x_{c-1}, then a ring allgather.
std::vector<Step> ring_allreduce(int size, int rank, std::size_t count, std::size_t element_size);

/// Rank-order reduce-scatter: every rank sends chunk c of its vector to rank c directly (one
/// step; the receives are kept for the finish callback, which folds them in rank order), then a
/// ring allgather of the chunks, rank c owning chunk c.
std::vector<Step> direct_reduce_scatter_allgather(int size, int rank, std::size_t count,
                                                  std::size_t element_size);

/// Direct allreduce for ranks that share memory (every rank writes into every other's windows
/// at about the cost of one copy), in two forms. `whole`: one step in which every rank sends its
/// whole vector to every other rank (kept for the finish callback, which folds all of them in rank
/// order, peer by peer in ascending rank as received); that step is `after_sends`, since the fold
/// overwrites what the in-place sends read. Otherwise two steps: every rank sends chunk c
/// (chunk_begin(count, size, c)) to rank c (kept: the finish callback folds the chunks of all
/// ranks in rank order), then sends its folded chunk to every other rank, straight into their work
/// buffers. All sends are in place, as are the receives of the second step: rank c posts chunk c
/// only after it has received every rank's chunk c, which those ranks sent after their last use
/// of it, so nothing writes a chunk that a rank still reads.
std::vector<Step> direct_allreduce(int size, int rank, std::size_t count, std::size_t element_size,
                                   bool whole);

/// Recursive-doubling allgather of `count` elements per rank: slot j (elements [j count,
/// (j+1) count)) of the work buffer holds rank j's contribution; the same fold as the allreduce
/// for sizes that are not powers of two.
std::vector<Step> recursive_doubling_allgather(int size, int rank, std::size_t count,
                                               std::size_t element_size);

/// Ring allgather of slots as above: size - 1 steps to the next rank.
std::vector<Step> ring_allgather(int size, int rank, std::size_t count, std::size_t element_size);

/// A 3D grid of ranks: `rank_at[(c0 * n1 + c1) * n2 + c2]` is the rank at coordinates (c0, c1,
/// c2), `coords[r]` the coordinates of rank r.
struct Grid3 {
    std::array<int, 3> extents{};
    std::vector<int> rank_at;
    std::vector<std::array<int, 3>> coords;

    /// Index into rank_at of coordinates c.
    std::size_t index_of(const std::array<int, 3>& c) const noexcept {
        const auto at = [](const std::array<int, 3>& a, std::size_t d) {
            return static_cast<std::size_t>(a[d]);
        };
        return (at(c, 0) * at(extents, 1) + at(c, 1)) * at(extents, 2) + at(c, 2);
    }
    int rank_of(const std::array<int, 3>& c) const noexcept { return rank_at[index_of(c)]; }
};

/// Part `part` (0, 1, 2) of a Trinaryx3 allreduce visits the dimensions in the order
/// trinaryx3_dimension(part, 0), (part, 1), (part, 2): part 0 x y z, part 1 y z x, part 2 z x y.
constexpr int trinaryx3_dimension(int part, int phase) noexcept {
    return (part + phase) % 3;
}

/// The element range [begin, end) that rank `rank` owns in part `part` after the reduce-scatter
/// phases of a Trinaryx3 allreduce of `count` elements.
std::array<std::size_t, 2> trinaryx3_block(const Grid3& grid, int rank, int part,
                                           std::size_t count);

/// Trinaryx3 allreduce on a 3D grid: the vector is cut into three parts (chunk_begin(count, 3,
/// .)); part p runs a ring reduce-scatter along its first dimension, then along its second on the
/// piece it then owns, then its third, and ring allgathers back in the reverse order. In every
/// phase the three parts move along three different dimensions, each on its own lane (its sends
/// name lane p), so that three rails carry data at once. Along a line of n ranks a piece is cut
/// into n chunks and chunk q is reduced along the chain of coordinates q + 1, q + 2, ..., q (mod
/// n); the rank at coordinate q keeps chunk q. The steps of the three parts run in lockstep: phase
/// k has max over the parts of (extent - 1) steps.
std::vector<Step> trinaryx3_allreduce(const Grid3& grid, int rank, std::size_t count,
                                      std::size_t element_size);

/// The rank-order variant: every rank sends each owner its blocks of the three parts directly
/// (lane p for part p; one step whose receives are kept for the finish callback, in the order
/// peer by peer (ascending rank, this rank left out), part by part, empty blocks left out), then
/// the allgather phases of trinaryx3_allreduce.
std::vector<Step> trinaryx3_rank_order(const Grid3& grid, int rank, std::size_t count,
                                       std::size_t element_size);

/// Binomial-tree broadcast of `count` elements from `root`.
std::vector<Step> binomial_broadcast(int size, int rank, int root, std::size_t count,
                                     std::size_t element_size);

/// Dissemination barrier: in step k one byte to rank + 2^k and from rank - 2^k (mod size).
std::vector<Step> dissemination_barrier(int size, int rank);

/// Direct barrier for ranks that share memory: one step, one byte to and from every other rank.
/// The same number of switches as the dissemination barrier's first step where ranks outnumber
/// cores, instead of one per step (p - 1 windows each way per rank instead of log2 p).
std::vector<Step> direct_barrier(int size, int rank);

} // namespace pmr::detail::coll

namespace pmr::detail {

/// The split schedule of Morie & Nanri for `messages` messages and `rails` rails:
/// schedule[step][rail] lists the messages whose fragment that rail carries in that step (see
/// neighbor.cpp for the reasoning).
std::vector<std::vector<std::vector<std::size_t>>> split_schedule(std::size_t messages,
                                                                  std::size_t rails);

} // namespace pmr::detail
