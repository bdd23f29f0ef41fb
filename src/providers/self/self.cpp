// SPDX-License-Identifier: MIT
#include "providers/self/self.hpp"

#include <map>
#include <mutex>

namespace pmr::detail {
namespace {

// Receive endpoints by key; the key travels in the (self-addressed) set-up message.
struct Table {
    std::mutex mutex;
    std::uint64_t next = 1;
    std::map<std::uint64_t, std::weak_ptr<Self::Endpoint>> endpoints;
};

Table& table() {
    static auto* t = new Table(); // never destroyed: windows may outlive static destruction order
    return *t;
}

} // namespace

Self::RecvWindow::RecvWindow(const WindowSpec& spec) {
    auto listing = std::make_unique<Listing>();
    listing->endpoint = std::make_shared<Endpoint>();
    listing->endpoint->buffer = spec.buffer;
    listing->endpoint->bytes = spec.bytes;
    receiver_.attach(&listing->endpoint->control, spec.buffer, nullptr);
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mutex);
    listing->key = t.next++;
    t.endpoints[listing->key] = listing->endpoint;
    listing_.reset(listing.release());
}

void Self::RecvWindow::Unlist::operator()(Listing* listing) const noexcept {
    const std::unique_ptr<Listing> owned(listing);
    // Same process, one thread per connection: no copy can be running now.
    copy_channel::revoke(listing->endpoint->control);
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mutex);
    t.endpoints.erase(listing->key);
}

Blob Self::RecvWindow::describe() const {
    return BlobWriter().put(listing_->key).take();
}

void Self::SendWindow::connect(Connection& /*connection*/, const Blob& peer,
                               std::size_t peer_bytes) {
    BlobReader reader(peer, *where_);
    auto key = reader.get<std::uint64_t>();
    reader.finish();
    {
        Table& t = table();
        std::lock_guard<std::mutex> lock(t.mutex);
        auto it = t.endpoints.find(key);
        if (it != t.endpoints.end()) {
            endpoint_ = it->second.lock();
        }
    }
    if (!endpoint_) {
        raise<PeerLost>("the matching receive window was destroyed before its first use", *where_);
    }
    if (endpoint_->bytes != peer_bytes) {
        reader.malformed("the receive window has " + std::to_string(endpoint_->bytes) +
                         " B, but announced " + std::to_string(peer_bytes) + " B");
    }
    CopyTarget target;
    target.control = &endpoint_->control;
    target.mapped = endpoint_->buffer;
    sender_.attach(target, where_);
}

} // namespace pmr::detail
