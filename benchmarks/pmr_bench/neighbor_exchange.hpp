// SPDX-License-Identifier: MIT
/// @file neighbor_exchange.hpp
/// The halo exchange through pmr's neighbour-exchange module (pmr::NeighborExchange), one variant
/// per algorithm: pmr-direct, pmr-split and pmr-auto.
#pragma once

#include "benchmark.hpp"
#include "halo.hpp"

#include <memory>
#include <vector>

namespace pmr_bench {

/// The module variants that `context` asks for, on the neighbours of `grid`. Their connections
/// follow PMR_PROVIDER (pmr-bench sets it from --provider) and PMR_RAILS (--rails).
std::vector<std::unique_ptr<Variant>>
neighbor_exchange_variants(const HaloGrid& grid, bool buffered, const Context& context);

} // namespace pmr_bench
