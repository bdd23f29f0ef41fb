// SPDX-License-Identifier: MIT
// The plans of the collectives: which rank sends which part of the work buffer to whom, step by
// step. Each function returns the steps of rank `rank` of `size` ranks, in elements of
// `element_size` bytes; steps in which a rank has nothing to do are left out of its list.
#pragma once

#include "collectives/engine.hpp"

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

/// Recursive-doubling allgather of `count` elements per rank: slot j (elements [j count,
/// (j+1) count)) of the work buffer holds rank j's contribution; the same fold as the allreduce
/// for sizes that are not powers of two.
std::vector<Step> recursive_doubling_allgather(int size, int rank, std::size_t count,
                                               std::size_t element_size);

/// Ring allgather of slots as above: size - 1 steps to the next rank.
std::vector<Step> ring_allgather(int size, int rank, std::size_t count, std::size_t element_size);

/// Binomial-tree broadcast of `count` elements from `root`.
std::vector<Step> binomial_broadcast(int size, int rank, int root, std::size_t count,
                                     std::size_t element_size);

/// Dissemination barrier: in step k one byte to rank + 2^k and from rank - 2^k (mod size).
std::vector<Step> dissemination_barrier(int size, int rank);

} // namespace pmr::detail::coll
