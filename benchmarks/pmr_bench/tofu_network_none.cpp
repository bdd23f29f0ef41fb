// SPDX-License-Identifier: MIT
// Built without the tofu provider: no emulated network to predict.
#include "allreduce_model.hpp"

namespace pmr_bench {

std::optional<TofuNetwork> emulated_tofu_network() {
    return std::nullopt;
}

} // namespace pmr_bench
