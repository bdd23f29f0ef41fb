// SPDX-License-Identifier: MIT
// The live windows of the process, so that MPI_Finalize can end them (bootstrap::at_finalize).
#include "core/state.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

namespace pmr::detail {
namespace {

struct LiveWindows {
    std::mutex mutex;
    std::vector<WindowState<Side::send>*> sends;
    std::vector<WindowState<Side::recv>*> recvs;
};

LiveWindows& live_windows() {
    static auto* live = new LiveWindows(); // never destroyed: windows may outlive statics
    return *live;
}

template <class W>
void erase_one(std::vector<W*>& list, W* item) noexcept {
    list.erase(std::remove(list.begin(), list.end(), item), list.end());
}

// At MPI_Finalize: every provider window ends as if destroyed, so that peers still waiting on one
// get PeerLost instead of waiting for a process that waits for them in MPI_Finalize.
void end_windows_at_finalize() noexcept {
    auto& live = live_windows();
    std::lock_guard<std::mutex> lock(live.mutex);
    auto end = [](auto* window) {
        window->native = std::monostate{};
        window->finalized = true;
    };
    std::for_each(live.sends.begin(), live.sends.end(), end);
    std::for_each(live.recvs.begin(), live.recvs.end(), end);
}

template <class W>
void track_in(std::vector<W*>& list, W* window) {
    auto& live = live_windows();
    {
        std::lock_guard<std::mutex> lock(live.mutex);
        list.push_back(window);
    }
    static const bool hooked = [] {
        bootstrap::at_finalize(&end_windows_at_finalize);
        return true;
    }();
    (void)hooked;
}

template <class W>
void untrack_in(std::vector<W*>& list, W* window) noexcept {
    std::lock_guard<std::mutex> lock(live_windows().mutex);
    erase_one(list, window);
}

} // namespace

void track(WindowState<Side::send>* window) {
    track_in(live_windows().sends, window);
}
void track(WindowState<Side::recv>* window) {
    track_in(live_windows().recvs, window);
}
void untrack(WindowState<Side::send>* window) noexcept {
    untrack_in(live_windows().sends, window);
}
void untrack(WindowState<Side::recv>* window) noexcept {
    untrack_in(live_windows().recvs, window);
}

} // namespace pmr::detail
