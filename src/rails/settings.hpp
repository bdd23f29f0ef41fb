// SPDX-License-Identifier: MIT
// One set of rail settings for every provider with rails:
//   PMR_DEVICES=a,b,...   one rail per device (names as the provider knows them: "eth0",
//                         "mlx5_0:1", "tni2")
//   PMR_RAILS=n           n rails, devices of the provider's choosing
// Each provider also reads PMR_<NAME>_DEVICES and PMR_<NAME>_RAILS (PMR_UCX_DEVICES, ...), which
// take precedence, so that settings for several providers can coexist.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pmr::detail::rails {

struct RailSettings {
    std::vector<std::string> devices; ///< empty: the provider chooses
    std::size_t rails = 1;
    bool explicit_count = false; ///< set by PMR_RAILS (or the provider's alias)
};

/// Reads the settings for provider `name` ("ucx"): at most `max` rails; `check_device` (may be
/// null) rejects device names that cannot exist, returning an explanation or an empty string.
/// @throws ArgumentError for malformed values, naming the variable.
RailSettings read_rail_settings(std::string_view name, std::size_t max,
                                std::string (*check_device)(const std::string&));

} // namespace pmr::detail::rails
