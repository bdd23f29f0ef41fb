// SPDX-License-Identifier: MIT
// The tofu provider as a rail transport (rails/put_path.hpp): puts on the command queue of each
// rail's TNI, notices as zero-byte puts whose remote notice carries the rails::Notice, memory
// registered with the emulated node.
#pragma once

#include "providers/tofu/process.hpp"
#include "rails/put_path.hpp"

#include <memory>
#include <string>
#include <utility>

namespace pmr::detail::tofu {

/// `Connection` is Tofu::Connection (tofu.hpp).
template <class TofuConnection>
struct BasicTransport
    : rails::TransportTypes<TofuConnection, tofu::Memory, tofu::RemoteKey, tofu::Request> {

    static std::size_t rails(const TofuProcess& process) { return process.settings().rails; }

    static Request put(TofuConnection& connection, std::size_t rail, const RemoteKey& key,
                       const void* source, std::size_t bytes, std::uint64_t address,
                       const std::string& where) {
        return connection.process().put(connection.tni(rail), key, source, bytes, address, where);
    }
    /// A slot and its sequence word in one go (see TofuProcess::put_pair).
    static std::pair<Request, Request>
    put_pair(TofuConnection& connection, std::size_t rail, const RemoteKey& key, const void* first,
             std::size_t first_bytes, std::uint64_t first_address, const void* second,
             std::size_t second_bytes, std::uint64_t second_address, const std::string& where) {
        return connection.process().put_pair(connection.tni(rail), key, first, first_bytes,
                                             first_address, second, second_bytes, second_address,
                                             where);
    }
    /// Nothing to do: a TNI's queue executes its commands in order, and a command lands only
    /// after the ones before it, so later operations on the rail land after earlier ones.
    static void fence(TofuConnection& /*connection*/, std::size_t /*rail*/,
                      const std::string& /*where*/) {}
    /// Rounds are signalled by puts (tofu connects windows with signal_by_message = false); a
    /// notice without data is a notice, and data would not fit the 32 B of piggyback.
    static Request signal(TofuConnection& connection, std::size_t rail, const Notice& notice,
                          const void* /*data*/, std::size_t bytes, const std::string& where) {
        if (bytes > 0) {
            raise<ProviderError>("the tofu transport cannot carry " + std::to_string(bytes) +
                                     " B inside a notice (32 B of piggyback hold the notice)",
                                 where, "This is a bug in pmr: tofu signals rounds by puts.");
        }
        notify(connection, rail, notice, false, where);
        return {};
    }
    static void notify(TofuConnection& connection, std::size_t rail, const Notice& notice,
                       bool reply, const std::string& where) {
        connection.process().notify(connection.tni(rail), connection.peer(),
                                    connection.remote_tni(rail), notice, reply, where);
    }
    static RemoteKey unpack(TofuConnection& connection, std::size_t rail, const Blob& key,
                            const char* what, const std::string& where) {
        BlobReader reader(key, where);
        const RegionKey region = get_region_key(reader);
        reader.finish();
        if (region.node != connection.peer().node->address().node) {
            reader.malformed(std::string("the key of the ") + what + " names another node");
        }
        return {connection.peer().node, connection.remote_tni(rail),
                std::make_shared<RemoteRegion>(region, where)};
    }
    static std::shared_ptr<Memory> allocate(TofuProcess& process, std::size_t bytes,
                                            std::size_t /*zeroed*/, const std::string& where) {
        return process.allocate_memory(bytes, where); // memory files start zeroed
    }
    static std::shared_ptr<Memory> map(TofuProcess& process, std::size_t /*rail*/, void* address,
                                       std::size_t bytes, const std::string& where) {
        return process.register_memory(address, bytes, where);
    }
    static std::shared_ptr<Memory> owned(TofuProcess& process, const void* address,
                                         std::size_t bytes) {
        return process.allocation(address, bytes);
    }
    static Blob pack(const Memory& memory, const std::string& /*where*/) {
        BlobWriter writer;
        put_region_key(writer, memory.region().key());
        return writer.take();
    }
    static void put_key(BlobWriter& writer, const Blob& key) { writer.put_bytes(key); }
    static Blob get_key(BlobReader& reader, const char* /*what*/, const std::string& /*where*/) {
        return reader.get_bytes();
    }
};

} // namespace pmr::detail::tofu
