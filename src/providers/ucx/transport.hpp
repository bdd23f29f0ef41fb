// SPDX-License-Identifier: MIT
// The ucx provider as a rail transport (rails/put_path.hpp): puts, fences and notices on the UCP
// endpoint of each rail, memory from and registered with the rail's context.
#pragma once

#include "providers/ucx/native.hpp"
#include "providers/ucx/process.hpp"
#include "rails/put_path.hpp"

#include <memory>
#include <string>

namespace pmr::detail {
struct Ucx;
} // namespace pmr::detail

namespace pmr::detail::ucx {

/// `Connection` is Ucx::Connection; the functions that need it are defined in ucx.cpp.
template <class UcxConnection>
struct BasicTransport {
    using Connection = UcxConnection;
    using Process = UcxProcess;
    using Memory = MemoryHandle;
    using RemoteKey = ucx::RemoteKey;
    using Request = ucx::Request;

    static std::size_t rails(const Process& process) { return process.size(); }

    static Request put(Connection& /*connection*/, std::size_t /*rail*/, const RemoteKey& key,
                       const void* source, std::size_t bytes, std::uint64_t address,
                       const std::string& where) {
        return ucx::put(key, source, bytes, address, where); // the key knows its endpoint
    }
    static void fence(Connection& connection, std::size_t rail, const std::string& where) {
        connection.endpoint(rail)->worker().fence(where);
    }
    // A connection with TCP lanes (lanes.hpp) carries every message of a window flagged
    // rails::stream_flag (a receive window from UcxSettings::lane_bytes on; SendWindow::connect)
    // through the lane of its rail, in order: its rounds and the sender_closed behind them.
    static Request signal(Connection& connection, std::size_t rail, const Notice& notice,
                          const void* data, std::size_t bytes, const std::string& where) {
        if (Lane* lane = stream(connection, rail, notice)) {
            return Request(lane->notify(notice, data, bytes, where));
        }
        return UcxProcess::signal(*connection.endpoint(rail), notice, data, bytes, where);
    }
    static Request send(Connection& connection, std::size_t rail, const rails::Piece& piece,
                        const void* data, std::size_t bytes, const std::string& where) {
        if (Lane* lane = stream(connection, rail, piece.notice)) {
            return Request(lane->send(piece, data, bytes, where));
        }
        return connection.process().send_piece(*connection.endpoint(rail), piece, data, bytes,
                                               connection.rendezvous_bytes(), where);
    }
    static void notify(Connection& connection, std::size_t rail, const Notice& notice, bool reply,
                       const std::string& where) {
        if (Lane* lane = stream(connection, rail, notice)) {
            (void)lane->notify(notice, nullptr, 0, where);
            return;
        }
        connection.process().send_notice(*connection.endpoint(rail), notice, reply, where);
    }
    static Lane* stream(Connection& connection, std::size_t rail, const Notice& notice) noexcept {
        return (notice.flags & rails::stream_flag) != 0 ? connection.lane(rail) : nullptr;
    }
    static RemoteKey unpack(Connection& connection, std::size_t rail, const Blob& key,
                            const char* what, const std::string& where) {
        return RemoteKey(connection.endpoint(rail), key, what, where,
                         connection.same_node() ? connection.peer_pid() : 0);
    }
    static std::shared_ptr<Memory> allocate(Process& process, std::size_t bytes,
                                            std::size_t /*zeroed*/, const std::string& where) {
        return process.arena_block(bytes, where); // zero-filled
    }
    static std::shared_ptr<Memory> map(Process& process, std::size_t rail, void* address,
                                       std::size_t bytes, const std::string& where) {
        return std::make_shared<Memory>(
            MemoryHandle::map(process.rail(rail).context, address, bytes, where));
    }
    static std::shared_ptr<Memory> owned(Process& process, const void* address, std::size_t bytes) {
        return process.allocation(address, bytes);
    }
    static Blob pack(const Memory& memory, const std::string& /*where*/) { return memory.pack(); }
    static void put_key(BlobWriter& writer, const Blob& key) { ucx::put_key(writer, key); }
    static Blob get_key(BlobReader& reader, const char* what, const std::string& where) {
        return ucx::get_key(reader, what, where);
    }
};

} // namespace pmr::detail::ucx
