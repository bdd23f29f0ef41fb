// SPDX-License-Identifier: MIT
// The self provider: both windows live in this process. The receive window's control block is
// shared with its sender through a process-wide table, and the sender copies with one memcpy.
#pragma once

#include "base/copy_sender.hpp"
#include "providers/interface.hpp"

#include <cstdint>
#include <memory>

namespace pmr::detail {

struct Self : StatelessProvider<Provider::self> {
    static constexpr bool handshake = true;

    /// The receiving end, kept alive by both windows so neither outlives the memory it touches.
    struct Endpoint {
        copy_channel::ControlBlock control;
        std::byte* buffer = nullptr;
        std::size_t bytes = 0;
    };

    class SendWindow : public CopySenderCalls<SendWindow> {
    public:
        explicit SendWindow(const WindowSpec& spec) noexcept : where_(spec.where) {}

        void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes);

    private:
        friend class CopySenderCalls<SendWindow>;
        const std::string* where_;
        std::shared_ptr<Endpoint> endpoint_;
        ClosingCopySender sender_; // last: closes before the members above go
    };

    class RecvWindow : public CopyReceiverCalls {
    public:
        explicit RecvWindow(const WindowSpec& spec);

        Blob describe() const;
        void connect(Connection& /*connection*/, const Blob& /*peer*/,
                     std::size_t /*peer_bytes*/) noexcept {}

    private:
        /// The endpoint as the process's table lists it, under the key its sender looks it up by.
        struct Listing {
            std::shared_ptr<Endpoint> endpoint;
            std::uint64_t key = 0;
        };
        /// Takes the endpoint out of the table (and revokes its credit) when the window goes.
        struct Unlist {
            void operator()(Listing* listing) const noexcept;
        };
        std::unique_ptr<Listing, Unlist> listing_;
    };
};

} // namespace pmr::detail
