// SPDX-License-Identifier: MIT
// What the process state of every rails provider does the same way, and what a connection of one
// holds of it: one state per process (ProcessHolder), library-owned window memory and memory a
// peer may still write into (KeptMemory), and connections that share the state and are moved,
// never copied or assigned.
#pragma once

#include "rails/kept_memory.hpp"
#include "rails/process_holder.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace pmr::detail::rails {

/// `Derived` (CRTP) brings `static std::shared_ptr<Derived> create(const std::string& where)` and
/// a member `KeptMemory<M> kept_`, declared where its destruction belongs among the members that
/// registered memory depends on; it befriends this class for both. `M` is its registered memory.
template <class Derived, class M>
class ProcessBase {
public:
    /// The state of this process, created at the first call.
    /// @throws UsageError during exit, and whatever Derived::create throws.
    static std::shared_ptr<Derived> instance(const std::string& where) {
        return ProcessHolder<Derived>::instance(where, [&] { return Derived::create(where); });
    }
    /// The state if it exists (and the process is not exiting), else null.
    static std::shared_ptr<Derived> existing() noexcept {
        return ProcessHolder<Derived>::existing();
    }

    /// Keeps `memory` until exit: a peer may still write into it.
    void bury(std::shared_ptr<M> memory) noexcept { kept().bury(std::move(memory)); }
    /// Lets the memory of a library-owned window go (Provider::deallocate).
    void deallocate_window(void* pointer) noexcept { kept().release(pointer); }
    /// The library-owned window memory holding [pointer, pointer + bytes), or null.
    std::shared_ptr<M> allocation(const void* pointer, std::size_t bytes) const {
        return static_cast<const Derived&>(*this).kept_.find(pointer, bytes);
    }

    ProcessBase(const ProcessBase&) = delete;
    ProcessBase& operator=(const ProcessBase&) = delete;

protected:
    ProcessBase() = default;
    ~ProcessBase() = default;

    /// Keeps `memory` as a library-owned window's until deallocate_window(); returns its data.
    void* keep_window(std::shared_ptr<M> memory) {
        void* data = memory->data();
        kept().add(std::move(memory));
        return data;
    }

private:
    KeptMemory<M>& kept() noexcept { return static_cast<Derived&>(*this).kept_; }
};

/// What every rails provider says of itself (providers/interface.hpp): set-up messages, rails.
struct RailsProvider {
    static constexpr bool handshake = true;
    static constexpr bool has_rails = true;
};

/// This side of a rails connection before the handshake holds the process state.
template <class Process>
struct LocalBase {
    std::shared_ptr<Process> process;
};

/// The part of a rails provider's connection that holds the process state. Connections move (the
/// core builds them in place and moves them once) but are never copied or assigned.
template <class P>
class ConnectionBase {
public:
    using Process = P;

    ConnectionBase(const ConnectionBase&) = delete;
    ConnectionBase& operator=(const ConnectionBase&) = delete;
    ConnectionBase(ConnectionBase&&) noexcept = default;
    ConnectionBase& operator=(ConnectionBase&&) = delete;

    Process& process() const noexcept { return *process_; }

protected:
    explicit ConnectionBase(std::shared_ptr<Process> process) noexcept
        : process_(std::move(process)) {}
    ~ConnectionBase() = default;

    std::shared_ptr<Process> process_; // first: the members of the connection go before it
};

} // namespace pmr::detail::rails
