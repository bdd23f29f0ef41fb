// SPDX-License-Identifier: MIT
// Targets of pmr's own objects (collectives, the neighbour exchange): internal, so that the public
// Target has no member an application must learn not to call. Defined in bootstrap/target.cpp;
// declared down here so that the collectives, which build on base only, can make them.
#pragma once

#include <pmr/communicator.hpp>
#include <pmr/target.hpp>

namespace pmr::detail {

/// What only pmr may do with a Target.
struct TargetAccess {
    /// A target whose connections pair only with other library targets, never with the
    /// application's, so that pmr's own objects do not shift the pairing of the application's
    /// connections and windows. @throws as the Target constructor.
    static Target library(const Communicator& comm, int rank, int send_tag, int recv_tag);
    /// Whether `target` was made by library().
    static bool is_library(const Target& target) noexcept { return target.library_; }
};

/// TargetAccess::library(), the spelling for call sites.
inline Target library_target(const Communicator& comm, int rank, int send_tag, int recv_tag) {
    return TargetAccess::library(comm, rank, send_tag, recv_tag);
}

} // namespace pmr::detail
