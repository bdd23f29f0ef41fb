// SPDX-License-Identifier: MIT
// The pieces of a multi-rail post read alike whatever their unit: pmr::RailRange counts bytes,
// pmr::RailSlice elements (the caller scales them by the element size).
#pragma once

#include <pmr/window.hpp>

#include <cstddef>

namespace pmr::detail {

inline std::size_t piece_start(const RailRange& piece) noexcept {
    return piece.offset;
}
inline std::size_t piece_length(const RailRange& piece) noexcept {
    return piece.bytes;
}
inline std::size_t piece_start(const RailSlice& piece) noexcept {
    return piece.first;
}
inline std::size_t piece_length(const RailSlice& piece) noexcept {
    return piece.count;
}

} // namespace pmr::detail
