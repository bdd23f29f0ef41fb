// SPDX-License-Identifier: MIT
// The declarations of libpmr's own settings (settings_table.cpp), which the registry
// (pmr/settings.hpp, settings.cpp) starts with.
#pragma once

#include <pmr/settings.hpp>

#include <vector>

namespace pmr::detail {

/// Every PMR_* variable libpmr reads, whichever providers this build contains, so that pmr-info
/// and docs/settings.md list the same settings in every build.
std::vector<settings::Setting> builtin_settings();

} // namespace pmr::detail
