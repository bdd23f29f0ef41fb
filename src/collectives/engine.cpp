// SPDX-License-Identifier: MIT
#include "collectives/engine.hpp"

#include "base/backoff.hpp"
#include "base/error.hpp"
#include "base/library_target.hpp"

#include <pmr/target.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace pmr::detail::coll {

namespace {
// Library targets pair only with library targets; within them, connections between the same two
// ranks pair in creation order, which every rank keeps by creating its collectives in one order.
constexpr int collective_tag = 1;
constexpr std::size_t no_rail = static_cast<std::size_t>(-1);

Connection& connection_to(const Communicator& comm, Connections& connections, int peer) {
    auto found = connections.find(peer);
    if (found == connections.end()) {
        found = connections
                    .emplace(peer,
                             Connection(library_target(comm, peer, collective_tag, collective_tag)))
                    .first;
    }
    return found->second;
}
} // namespace

void connect_peers(const Communicator& comm, Connections& connections,
                   const std::vector<Step>& steps) {
    for (const Step& step : steps) {
        for (const Send& send : step.sends) {
            connection_to(comm, connections, send.peer);
        }
        for (const Recv& recv : step.recvs) {
            connection_to(comm, connections, recv.peer);
        }
    }
}

std::size_t rail_of_lane(Connection& connection, int lane) {
    const std::size_t rails = connection.rails();
    std::vector<std::pair<std::string, std::size_t>> order;
    order.reserve(rails);
    for (std::size_t i = 0; i < rails; ++i) {
        order.emplace_back(connection.rail(i).device, i);
    }
    // Devices by name; rails without a name keep their index order among themselves.
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    return order[static_cast<std::size_t>(lane) % rails].second;
}

Engine::Engine(const Communicator& comm, Connections& connections, std::vector<Step> steps,
               std::size_t element_size, Reducer reducer, std::string what, std::byte* work,
               WarmUp warm)
    : steps_(std::move(steps)), element_size_(element_size), reducer_(reducer),
      what_(std::move(what)), connections_(connections), bound_(work) {
    auto connection = [&](int peer) -> Connection& {
        return connection_to(comm, connections_, peer);
    };
    auto in_place = [&](std::size_t offset) {
        if (bound_ == nullptr) {
            raise<UsageError>("an in-place transfer without a work buffer", what_,
                              "This is a bug in pmr's collectives; please report it.");
        }
        return bound_ + offset;
    };
    // Connections first, then the windows in step order (see the header).
    connect_peers(comm, connections_, steps_);
    windows_.resize(steps_.size());
    for (std::size_t i = 0; i < steps_.size(); ++i) {
        StepWindows& w = windows_[i];
        for (const Send& send : steps_[i].sends) {
            if (send.in_place) {
                w.sends.emplace_back(connection(send.peer), in_place(send.offset), send.bytes);
            } else {
                w.sends.emplace_back(connection(send.peer), send.bytes);
            }
            w.rails.push_back(
                send.lane == any_lane ? no_rail : rail_of_lane(connection(send.peer), send.lane));
        }
        for (const Recv& recv : steps_[i].recvs) {
            if (recv.in_place) {
                w.recvs.emplace_back(connection(recv.peer), in_place(recv.offset), recv.bytes);
            } else {
                w.recvs.emplace_back(connection(recv.peer), recv.bytes);
            }
        }
        w.received.assign(w.recvs.size(), 0);
        w.granted.assign(w.recvs.size(), 0);
    }
    if (warm == WarmUp::yes) {
        warm_up();
    }
}

void Engine::warm_up() {
    // One run on scratch memory, while every rank is in this constructor anyway: it completes the
    // set-up of every connection and window (so that the steady state starts with the first real
    // run), and no window is ever destroyed with its set-up unfinished, which would leave a stale
    // set-up message for the next window between the same two ranks.
    std::size_t extent = 1;
    for (const Step& step : steps_) {
        for (const Send& send : step.sends) {
            extent = std::max(extent, send.offset + send.bytes);
        }
        for (const Recv& recv : step.recvs) {
            extent = std::max(extent, recv.offset + recv.bytes);
        }
    }
    std::vector<std::byte> scratch(extent);
    work_ = scratch.data();
    warming_up_ = true;
    start();
    wait();
    warming_up_ = false;
    work_ = bound_;
}

void Engine::set_work(std::byte* work) {
    if (bound_ != nullptr && work != bound_) {
        raise<UsageError>("a work buffer other than the one the in-place windows lie over", what_,
                          "This is a bug in pmr's collectives; please report it.");
    }
    work_ = work;
}

void Engine::start() {
    if (active_) {
        raise<UsageError>("start() while the previous run is in flight", what_,
                          "Complete each run with wait() (or test() returning true) first.");
    }
    ++run_;
    for (StepWindows& w : windows_) {
        for (std::size_t i = 0; i < w.recvs.size(); ++i) {
            if (w.granted[i] != run_) {
                w.recvs[i].init();
                w.recvs[i].post();
            }
        }
    }
    active_ = true;
    step_ = 0;
    if (!steps_.empty()) {
        begin_step(0);
    }
}

void Engine::begin_step(std::size_t index) {
    const Step& step = steps_[index];
    StepWindows& w = windows_[index];
    for (std::size_t i = 0; i < step.sends.size(); ++i) {
        const Send& send = step.sends[i];
        SendWindow<std::byte>& window = w.sends[i];
        window.init();
        if (send.in_place) {
            // Over the work buffer already; the set-up run moves nothing through it.
            window.post(Elements{warming_up_ ? 0 : send.bytes});
            pending_sends_.push_back(&window);
            continue;
        }
        std::memcpy(window.data(), work_ + send.offset, send.bytes);
        if (w.rails[i] == no_rail) {
            window.post();
        } else {
            const RailRange whole{0, send.bytes, w.rails[i]}; // bytes: the core's own unit
            window.core().post(&whole, 1);
        }
        pending_sends_.push_back(&window);
    }
}

void Engine::end_step(std::size_t index) {
    const Step& step = steps_[index];
    StepWindows& w = windows_[index];
    const bool finish = step.finish && finish_;
    if (finish) {
        received_.clear();
    }
    for (std::size_t i = 0; i < step.recvs.size(); ++i) {
        const Recv& recv = step.recvs[i];
        const std::byte* data = w.recvs[i].data();
        if (finish) {
            received_.push_back(data);
        }
        if (recv.in_place) {
            continue; // landed in place (nothing at all in the set-up run)
        }
        switch (recv.action) {
        case Action::copy:
            std::memcpy(work_ + recv.offset, data, recv.bytes);
            break;
        case Action::reduce_lower:
        case Action::reduce_upper:
            reducer_(work_ + recv.offset, data, recv.bytes / element_size_,
                     recv.action == Action::reduce_lower);
            break;
        case Action::keep:
            break;
        }
    }
    if (finish) {
        finish_(received_);
    }
}

void Engine::grant_next_run(std::size_t index) {
    // The next run's grant of the staged receives of a step whose data is consumed: it travels
    // while this rank finishes the run, so that the peer's post of the next run finds it rather
    // than a one-way trip later (where a grant is a message: tofu, UCX). Windows over the work
    // buffer wait for start(): the caller owns that buffer between runs.
    const Step& step = steps_[index];
    StepWindows& w = windows_[index];
    for (std::size_t i = 0; i < step.recvs.size(); ++i) {
        if (!step.recvs[i].in_place) {
            w.recvs[i].init();
            w.recvs[i].post();
            w.granted[i] = run_ + 1;
        }
    }
}

bool Engine::sends_complete() {
    // Sends complete once the receiver has granted its window; polling them also moves the data
    // of those posted before the grant.
    for (std::size_t i = 0; i < pending_sends_.size();) {
        if (pending_sends_[i]->test()) {
            pending_sends_[i] = pending_sends_.back();
            pending_sends_.pop_back();
        } else {
            ++i;
        }
    }
    return pending_sends_.empty();
}

bool Engine::test() {
    if (!active_) {
        raise<UsageError>("test() or wait() without a run in flight", what_,
                          "Call start() first; after completion, start() again for a new run.");
    }
    sends_complete();
    while (step_ < steps_.size()) {
        StepWindows& w = windows_[step_];
        bool complete = true;
        const std::size_t recvs = w.recvs.size();
        const std::uint64_t run = run_;
        std::uint64_t* const received = w.received.data();
        RecvWindow<std::byte>* const windows = w.recvs.data();
        for (std::size_t i = 0; i < recvs; ++i) {
            if (received[i] != run) {
                if (windows[i].test()) {
                    received[i] = run;
                } else {
                    complete = false;
                }
            }
        }
        if (!complete) {
            return false;
        }
        // The plans with after_sends receive from every peer they send to in that step: all of
        // them have started this run and granted their windows, so the sends complete soon.
        if (steps_[step_].after_sends && !sends_complete()) {
            return false;
        }
        end_step(step_);
        ++step_;
        if (step_ < steps_.size()) {
            begin_step(step_); // first: the next sends are the critical path
        }
        grant_next_run(step_ - 1);
    }
    if (!sends_complete()) {
        return false;
    }
    active_ = false;
    return true;
}

void Engine::wait() {
    if (test() || poll_briefly([this] { return test(); })) {
        return;
    }
    // The windows' own test() watches the peers and PMR_TIMEOUT; this loop only paces the polls.
    Backoff backoff;
    while (!test()) {
        backoff.pause();
    }
}

} // namespace pmr::detail::coll
