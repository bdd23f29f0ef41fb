// SPDX-License-Identifier: MIT
// The self provider: both windows live in this process. The receive window's control block is
// shared with its sender through a process-wide table, and the sender copies with one memcpy.
#pragma once

#include "base/copy_sender.hpp"
#include "providers/interface.hpp"

#include <cstdint>
#include <memory>

namespace pmr::detail {

struct Self : ChosenByTargetOnly {
    static constexpr Provider id = Provider::self;
    static constexpr bool handshake = true;
    static constexpr bool has_rails = false;
    using Local = SilentLocal<Provider::self>;
    using Connection = StatelessConnection<Provider::self>;

    /// The receiving end, kept alive by both windows so neither outlives the memory it touches.
    struct Endpoint {
        copy_channel::ControlBlock control;
        std::byte* buffer = nullptr;
        std::size_t bytes = 0;
    };

    class SendWindow {
    public:
        explicit SendWindow(const WindowSpec& spec) noexcept : where_(spec.where) {}

        Blob describe() const { return {}; }
        void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes);
        void post(const std::byte* data, std::size_t bytes) { sender_.post(data, bytes); }
        bool test() { return sender_.progress(); }
        bool peer_gone() const noexcept { return false; }

    private:
        const std::string* where_;
        std::shared_ptr<Endpoint> endpoint_;
        ClosingCopySender sender_; // last: closes before the members above go
    };

    class RecvWindow {
    public:
        explicit RecvWindow(const WindowSpec& spec);
        RecvWindow(RecvWindow&&) noexcept = default;
        RecvWindow& operator=(RecvWindow&&) noexcept = default;
        ~RecvWindow();

        Blob describe() const;
        void connect(Connection& /*connection*/, const Blob& /*peer*/,
                     std::size_t /*peer_bytes*/) noexcept {}
        void init() noexcept { receiver_.init(); }
        bool test() noexcept { return receiver_.test(); }
        std::size_t received_bytes() const noexcept { return receiver_.received_bytes(); }
        bool peer_gone() const noexcept { return receiver_.sender_closed(); }

    private:
        std::shared_ptr<Endpoint> endpoint_;
        std::uint64_t key_ = 0;
        CopyReceiver receiver_;
    };
};

} // namespace pmr::detail
