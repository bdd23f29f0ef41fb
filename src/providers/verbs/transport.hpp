// SPDX-License-Identifier: MIT
// The verbs provider as a rail transport (rails/put_path.hpp): RDMA writes on the queue pair of
// each rail, notices as RDMA writes with immediate into the peer's notice ring (lane.hpp), memory
// registered with the rail's protection domain.
#pragma once

#include "providers/verbs/lane.hpp"
#include "providers/verbs/wire.hpp"
#include "rails/put_path.hpp"

#include <memory>
#include <string>

namespace pmr::detail::verbs {

/// A peer's registered memory as this side writes into it. Never mapped here.
struct RemoteKey {
    RemoteRegion region;
    std::byte* pointer(std::uint64_t /*address*/) const noexcept { return nullptr; }
};

/// `Connection` is Verbs::Connection (verbs.hpp).
template <class VerbsConnection>
struct BasicTransport
    : rails::TransportTypes<VerbsConnection, verbs::Memory, verbs::RemoteKey, verbs::Request> {

    static std::size_t rails(const VerbsProcess& process) { return process.size(); }

    static Request put(VerbsConnection& connection, std::size_t rail, const RemoteKey& key,
                       const void* source, std::size_t bytes, std::uint64_t address,
                       const std::string& where) {
        return connection.lane(rail).write(source, bytes, key.region, address, where);
    }
    /// RC executes a queue pair's requests in order, and a notice (a write with immediate) is seen
    /// only after the writes before it were placed: nothing to do.
    static void fence(VerbsConnection& /*connection*/, std::size_t /*rail*/,
                      const std::string& /*where*/) {}
    static Request signal(VerbsConnection& connection, std::size_t rail, const Notice& notice,
                          const void* data, std::size_t bytes, const std::string& where) {
        connection.lane(rail).notice(notice, data, bytes, true, where); // copied: done at once
        return {};
    }
    static void notify(VerbsConnection& connection, std::size_t rail, const Notice& notice,
                       bool /*reply*/, const std::string& where) {
        connection.lane(rail).notice(notice, nullptr, 0, false, where);
    }
    static RemoteKey unpack(VerbsConnection& /*connection*/, std::size_t /*rail*/, const Blob& key,
                            const char* what, const std::string& where) {
        return {unpack_region(key, what, where)};
    }
    static std::shared_ptr<Memory> allocate(VerbsProcess& process, std::size_t bytes,
                                            std::size_t /*zeroed*/, const std::string& where) {
        return process.allocate(0, bytes, where); // zeroed entirely
    }
    static std::shared_ptr<Memory> map(VerbsProcess& process, std::size_t rail, void* address,
                                       std::size_t bytes, const std::string& where) {
        return process.map(rail, address, bytes, where);
    }
    static std::shared_ptr<Memory> owned(VerbsProcess& process, const void* address,
                                         std::size_t bytes) {
        return process.allocation(address, bytes);
    }
    static Blob pack(const Memory& memory, const std::string& /*where*/) {
        return pack_region(memory.region());
    }
    static void put_key(BlobWriter& writer, const Blob& key) { writer.put_bytes(key); }
    static Blob get_key(BlobReader& reader, const char* /*what*/, const std::string& /*where*/) {
        return reader.get_bytes(); // checked by unpack_region()
    }
};

} // namespace pmr::detail::verbs
