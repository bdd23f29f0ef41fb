// SPDX-License-Identifier: MIT
/// @file provider.hpp
/// The transports pmr knows, which of them this build contains, and what a connection's rails are.
#pragma once

#include <pmr/config.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pmr {

/// A transport. Which ones exist in a build is fixed at configure time (`PMR_WITH_<NAME>`); which
/// one a connection uses is decided once, before any of its resources exist.
///
/// The enumerators are generated from the provider list of the build system (pmr/config.hpp):
/// `null` (the peer is MPI_PROC_NULL: every operation is a no-op), `self` (the own process: one
/// memcpy), `shm` (a peer on the same node: shared memory and cross-memory attach), `ucx` (UCX
/// one-sided puts over any network UCX supports), `tofu` (an emulated Tofu interconnect between
/// processes of one machine, with a timing model), and the providers added after them. Every
/// enumerator exists in every build; is_compiled() tells which ones this build contains.
enum class Provider : unsigned char {
#define PMR_PROVIDER_ENUMERATOR(name) name,
    PMR_PROVIDER_LIST(PMR_PROVIDER_ENUMERATOR)
#undef PMR_PROVIDER_ENUMERATOR
};

/// Lower-case name of a provider ("shm").
std::string_view to_string(Provider provider) noexcept;

/// Provider of that name, or nothing if the name is unknown.
std::optional<Provider> provider_from_string(std::string_view name) noexcept;

/// Providers compiled into this build: null and self first, then the others in order of
/// preference for inter-process connections (providers that are only used when forced last).
const std::vector<Provider>& compiled_providers() noexcept;

/// Whether `provider` is compiled into this build.
bool is_compiled(Provider provider) noexcept;

/// Comma-separated list of the compiled providers, for messages.
std::string compiled_providers_string();

/// What a provider says about itself (the static description of its type), for code that adapts
/// to it, such as the neighbour exchange: nobody asks a provider its name to learn what it can do.
struct ProviderTraits {
    /// Whether a connection may have several rails (SendWindow::post(ranges)).
    bool has_rails = false;
    /// > 0: chosen by default for the peers it reaches, the highest first; 0: only when forced.
    int preference = 0;
    /// Messages from this size on gain from being split over several rails (the neighbour
    /// exchange's crossover where nothing else gives one).
    std::size_t split_crossover_bytes = std::size_t{4} << 10;
    /// The smallest fragment worth a rail of its own.
    std::size_t min_fragment_bytes = std::size_t{1} << 10;
};

/// The description of `provider`; the defaults above for a provider not compiled in.
ProviderTraits traits(Provider provider) noexcept;

/// One rail of a connection: an independent network path (a NIC, a port, a Tofu network
/// interface) that SendWindow::post(ranges) can put pieces of a message on.
struct RailInfo {
    /// Device as the provider names it ("eth0", "mlx5_0:1", "tni2"); empty when the provider
    /// chose the device itself.
    std::string device;
    /// Peak bandwidth of the rail in bytes per second, 0 if unknown.
    double bandwidth = 0.0;
};

} // namespace pmr
