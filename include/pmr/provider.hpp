// SPDX-License-Identifier: MIT
/// @file provider.hpp
/// Names of the transports pmr knows and which of them this build contains.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pmr {

/// A transport. Which ones exist in a build is fixed at configure time (`PMR_WITH_<NAME>`); which
/// one a connection uses is decided once, when the connection is established.
enum class Provider : unsigned char {
    null, ///< peer is MPI_PROC_NULL: every operation is a no-op
    self, ///< peer is the own process: one memcpy
    shm,  ///< peer on the same node: shared memory and cross-memory attach
    ucx,  ///< UCX (UCP) one-sided puts, any network UCX supports
};

/// Lower-case name of a provider ("shm").
std::string_view to_string(Provider provider) noexcept;

/// Provider of that name, or nothing if the name is unknown.
std::optional<Provider> provider_from_string(std::string_view name) noexcept;

/// Providers compiled into this build, in order of preference for inter-process connections.
const std::vector<Provider>& compiled_providers() noexcept;

/// Whether `provider` is compiled into this build.
bool is_compiled(Provider provider) noexcept;

/// Comma-separated list of the compiled providers, for messages.
std::string compiled_providers_string();

} // namespace pmr
