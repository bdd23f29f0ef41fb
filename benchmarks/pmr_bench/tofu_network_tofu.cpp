// SPDX-License-Identifier: MIT
// The tofu provider is compiled in: its own timing model, read from the same environment.
#include "allreduce_model.hpp"

#include "providers/tofu/emulated/model.hpp"

#include <cstdlib>
#include <string>

namespace pmr_bench {

std::optional<TofuNetwork> emulated_tofu_network() {
    const char* provider = std::getenv("PMR_PROVIDER"); // NOLINT(concurrency-mt-unsafe)
    if (provider == nullptr || std::string(provider) != "tofu") {
        return std::nullopt;
    }
    const auto p = pmr::detail::tofu::read_model_parameters();
    if (!p.enabled) {
        return std::nullopt;
    }
    TofuNetwork net;
    net.name = p.name;
    net.tnis = p.tnis;
    net.link_bandwidth = p.link_bandwidth;
    net.latency = p.put_latency;
    net.injection_bandwidth = p.injection_bandwidth;
    net.time_scale = p.time_scale;
    return net;
}

} // namespace pmr_bench
