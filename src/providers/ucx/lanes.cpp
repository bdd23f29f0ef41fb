// SPDX-License-Identifier: MIT
#include "providers/ucx/lanes.hpp"

#include "base/environment.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sstream>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <thread>
#include <unistd.h>

namespace pmr::detail::ucx {
namespace {

constexpr int connect_timeout_ms = 5000;
// What one call writes to a lane, or reads from one, at most: a process that sends and receives
// at once (a halo exchange) turns from one direction to the other at least this often, so that
// neither socket buffer stays full while the process works on the other.
// (Over TCP loopback, 2 ranks: without a bound the 16 MiB exchange ran at 0.79-0.97x Open MPI's
// speed, with 256 KiB at 1.09-1.31x; 1 MiB as fast as 256 and 512 KiB or faster in pingpong and
// exchange at 1-16 MiB, 64 KiB at 0.7-0.8x their speed.)
constexpr std::size_t turn_bytes = std::size_t{1024} * 1024;
// What one sendmsg() gives the kernel at most: over loopback (MTU 64 KiB) a whole turn; over a
// network device 128 KiB. Between two network namespaces on veth (MTU 1500) 128 KiB writes made
// the 1-16 MiB pingpong 1.4-2.6x Open MPI's speed where 1 MiB writes made it 0.9-1.2x; over
// loopback 128 KiB writes ran at 0.75-1.2x against 1 MiB writes' 1.04-1.8x.
constexpr std::size_t loopback_write_bytes = turn_bytes;
constexpr std::size_t network_write_bytes = std::size_t{128} * 1024;
constexpr std::size_t scratch_bytes = std::size_t{64} * 1024;
constexpr std::uint32_t loopback_address = 0x7f000001; // 127.0.0.1, host byte order

std::string errno_text(int error) {
    return {std::strerror(error)}; // NOLINT(concurrency-mt-unsafe): messages only
}

std::string ipv4_text(std::uint32_t address) {
    char text[INET_ADDRSTRLEN] = {};
    in_addr a{};
    a.s_addr = address;
    inet_ntop(AF_INET, &a, text, sizeof text);
    return text;
}

std::uint64_t random_token() noexcept {
    std::uint64_t token = 0;
    while (token == 0) {
        if (getrandom(&token, sizeof token, 0) != static_cast<ssize_t>(sizeof token)) {
            // No entropy source: the pid and the clock keep tokens of one host apart.
            token = (static_cast<std::uint64_t>(getpid()) << 32U) ^
                    static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&token));
        }
    }
    return token;
}

// The IPv4 address and netmask of local network device `device` (network byte order).
bool device_address(const std::string& device, std::uint32_t& address, std::uint32_t& mask) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) {
        return false;
    }
    bool found = false;
    for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
        if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET ||
            a->ifa_netmask == nullptr || device != a->ifa_name) {
            continue;
        }
        address = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
        mask = reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr;
        found = true;
    }
    freeifaddrs(list);
    return found;
}

void set_no_delay(int fd) noexcept {
    const int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

} // namespace

std::string tcp_lane_device(const std::string& info) {
    std::istringstream lines(info);
    for (std::string line; std::getline(lines, line);) {
        const std::size_t lane = line.find("lane[0]:");
        if (lane == std::string::npos) {
            continue;
        }
        std::istringstream words(line.substr(lane));
        std::string word;
        std::string resource;
        words >> word >> resource; // "lane[0]:", "0:tcp/lo.0"
        const std::size_t colon = resource.find(':');
        const std::size_t slash = resource.find('/');
        const std::size_t dot = resource.rfind('.');
        if (colon == std::string::npos || slash == std::string::npos || slash < colon ||
            resource.compare(colon + 1, slash - colon - 1, "tcp") != 0) {
            return {};
        }
        const std::size_t end = (dot != std::string::npos && dot > slash) ? dot : resource.size();
        return resource.substr(slash + 1, end - slash - 1);
    }
    return {};
}

// -------------------------------------------------------------------------------------------------
// Lane (outgoing)
// -------------------------------------------------------------------------------------------------

Lane::Lane(int fd, std::uint64_t peer_token, std::string peer_text, bool loopback,
           std::atomic<std::size_t>* sending) noexcept
    : fd_(fd), peer_token_(peer_token), peer_text_(std::move(peer_text)), sending_(sending),
      write_bytes_(loopback ? loopback_write_bytes : network_write_bytes) {}

Lane::~Lane() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!queue_.empty()) {
        sending_->fetch_sub(1, std::memory_order_relaxed);
        for (Queued& q : queue_) {
            if (q.send) {
                q.send->state.store(LaneSend::failed, std::memory_order_release);
            }
        }
        queue_.clear();
    }
    if (fd_ >= 0) {
        ::close(fd_); // the kernel still sends what it holds, then ends the stream
    }
}

std::shared_ptr<LaneSend> Lane::send(const rails::Piece& piece, const void* data, std::size_t bytes,
                                     const std::string& where) {
    LaneFrame frame;
    frame.kind = LaneFrame::piece_frame;
    frame.bytes = bytes;
    frame.piece = piece;
    std::lock_guard<std::mutex> lock(mutex_);
    return enqueue_locked(frame, data, bytes, where);
}

std::shared_ptr<LaneSend> Lane::notify(const rails::Notice& notice, const void* data,
                                       std::size_t bytes, const std::string& where,
                                       LaneFrame::Kind kind) {
    LaneFrame frame;
    frame.kind = kind;
    frame.bytes = bytes;
    frame.piece.notice = notice;
    std::lock_guard<std::mutex> lock(mutex_);
    return enqueue_locked(frame, data, bytes, where);
}

std::shared_ptr<LaneSend> Lane::enqueue_locked(const LaneFrame& frame, const void* data,
                                               std::size_t bytes, const std::string& where) {
    if (failed_.load(std::memory_order_relaxed)) {
        raise<PeerLost>("the TCP lane to " + peer_text_ + " failed: " + errno_text(error_), where,
                        "The peer process died or the network between the hosts failed.");
    }
    // Everything that can throw comes before the first byte goes out.
    Queued q;
    q.frame = frame;
    q.data = static_cast<const std::byte*>(data);
    q.bytes = bytes;
    q.send = std::make_shared<LaneSend>();
    q.send->lane = this;
    std::shared_ptr<LaneSend> send = q.send;
    const bool was_empty = queue_.empty();
    queue_.push_back(std::move(q));
    if (was_empty) {
        sending_->fetch_add(1, std::memory_order_relaxed);
        queued_.store(1, std::memory_order_relaxed);
        if (!write_locked()) {
            raise<PeerLost>("the TCP lane to " + peer_text_ + " failed: " + errno_text(error_),
                            where,
                            "The peer process died or the network between the hosts failed.");
        }
    }
    // Done once its last byte is in the kernel, a frame without data too (a notice queued behind
    // others must not count as sent before it is).
    return send->state.load(std::memory_order_relaxed) == LaneSend::done ? nullptr : send;
}

bool Lane::flush() noexcept {
    if (queued_.load(std::memory_order_relaxed) == 0) {
        return false;
    }
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || queue_.empty()) {
        return false;
    }
    const std::size_t before = queue_.front().written;
    const std::size_t entries = queue_.size();
    (void)write_locked();
    return queue_.size() != entries || (!queue_.empty() && queue_.front().written != before);
}

bool Lane::write_locked() noexcept {
    std::size_t budget = turn_bytes;
    while (!queue_.empty() && budget > 0) {
        Queued& q = queue_.front();
        constexpr std::size_t header = sizeof(LaneFrame);
        iovec parts[2];
        int count = 0;
        if (q.written < header) {
            parts[count++] = {reinterpret_cast<char*>(&q.frame) + q.written, header - q.written};
        }
        const std::size_t data_done = q.written > header ? q.written - header : 0;
        if (q.bytes > data_done) {
            parts[count++] = {const_cast<std::byte*>(q.data) + data_done,
                              std::min({q.bytes - data_done, budget, write_bytes_})};
        }
        msghdr message{};
        message.msg_iov = parts;
        message.msg_iovlen = static_cast<std::size_t>(count);
        const ssize_t n = count == 0 ? 0 : ::sendmsg(fd_, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return true;
            }
            fail_locked(errno);
            return false;
        }
        q.written += static_cast<std::size_t>(n);
        budget -= std::min(budget, static_cast<std::size_t>(n));
        if (q.written < header + q.bytes) {
            continue; // the socket may take more now, or answers EAGAIN
        }
        if (q.send) {
            q.send->state.store(LaneSend::done, std::memory_order_release);
        }
        queue_.pop_front();
    }
    if (!queue_.empty()) {
        return true; // the rest at the next flush
    }
    queued_.store(0, std::memory_order_relaxed);
    sending_->fetch_sub(1, std::memory_order_relaxed);
    return true;
}

void Lane::fail_locked(int error) noexcept {
    error_ = error;
    failed_.store(true, std::memory_order_release);
    debug_log("ucx lane to " + peer_text_ + " failed: " + errno_text(error));
    for (Queued& q : queue_) {
        if (q.send) {
            q.send->state.store(LaneSend::failed, std::memory_order_release);
        }
    }
    if (!queue_.empty()) {
        queue_.clear();
        queued_.store(0, std::memory_order_relaxed);
        sending_->fetch_sub(1, std::memory_order_relaxed);
    }
}

// -------------------------------------------------------------------------------------------------
// TcpLanes
// -------------------------------------------------------------------------------------------------

TcpLanes::TcpLanes(rails::Registry& registry) noexcept
    : registry_(registry), token_(random_token()) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof address;
    const int epoll = listener >= 0 ? ::epoll_create1(EPOLL_CLOEXEC) : -1;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = nullptr; // the listener
    if (listener < 0 || epoll < 0 ||
        ::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener, SOMAXCONN) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
        ::epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event) != 0) {
        debug_log("ucx: no TCP lanes (the message path stays on UCX): " + errno_text(errno));
        if (listener >= 0) {
            ::close(listener);
        }
        if (epoll >= 0) {
            ::close(epoll);
        }
        return;
    }
    listener_ = listener;
    epoll_ = epoll;
    port_ = ntohs(address.sin_port);
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
        for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
            if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET &&
                a->ifa_netmask != nullptr) {
                addresses_.push_back(
                    {reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr,
                     reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr});
            }
        }
        freeifaddrs(list);
    }
}

TcpLanes::~TcpLanes() {
    {
        std::lock_guard<std::mutex> lock(open_mutex_);
        outgoing_.clear();
        all_outgoing_.clear();
    }
    std::lock_guard<std::mutex> lock(receive_mutex_);
    for (Incoming& in : incoming_) {
        if (in.data == Incoming::Data::direct) {
            registry_.received(in.frame.piece, in.data_read, false);
        }
        ::close(in.fd);
    }
    incoming_.clear();
    if (listener_ >= 0) {
        ::close(listener_);
    }
    if (epoll_ >= 0) {
        ::close(epoll_);
    }
}

void TcpLanes::describe(BlobWriter& hello, std::uint64_t lane_bytes) const {
    hello.put<std::uint8_t>(listening() ? 1 : 0).put(token_).put(lane_bytes).put(port_);
    hello.put(static_cast<std::uint32_t>(addresses_.size()));
    for (const LanePeer::Address& a : addresses_) {
        hello.put(a.ipv4).put(a.mask);
    }
}

LanePeer TcpLanes::read(BlobReader& hello) {
    LanePeer peer;
    peer.listening = hello.get<std::uint8_t>() != 0;
    peer.token = hello.get<std::uint64_t>();
    peer.lane_bytes = hello.get<std::uint64_t>();
    peer.port = hello.get<std::uint16_t>();
    const auto count = hello.get<std::uint32_t>();
    if (count > 4096) {
        hello.malformed("the peer names " + std::to_string(count) + " lane addresses");
    }
    for (std::uint32_t i = 0; i < count; ++i) {
        LanePeer::Address a;
        a.ipv4 = hello.get<std::uint32_t>();
        a.mask = hello.get<std::uint32_t>();
        peer.addresses.push_back(a);
    }
    return peer;
}

std::shared_ptr<Lane> TcpLanes::open(std::size_t rail, const LanePeer& peer,
                                     const std::string& device, const std::string& where) {
    if (!listening() || !peer.listening || device.empty()) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(open_mutex_);
    if (auto it = outgoing_.find({rail, peer.token}); it != outgoing_.end()) {
        return it->second;
    }
    // The peer's address on the subnet of the device UCX chose for this rail; over loopback the
    // peer shares this network namespace.
    std::uint32_t local = 0;
    std::uint32_t mask = 0;
    std::uint32_t remote = 0;
    if (device == "lo") {
        remote = htonl(loopback_address);
    } else if (device_address(device, local, mask)) {
        for (const LanePeer::Address& a : peer.addresses) {
            if ((a.ipv4 & mask) == (local & mask) && a.ipv4 != local) {
                remote = a.ipv4;
                break;
            }
        }
    }
    const std::string text = ipv4_text(remote) + ":" + std::to_string(peer.port);
    if (remote == 0) {
        debug_log("ucx: no TCP lane on rail " + std::to_string(rail) +
                  ": the peer has no address on " + device + "'s subnet [" + where + "]");
        return nullptr;
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        debug_log("ucx: no TCP lane: socket(): " + errno_text(errno) + " [" + where + "]");
        return nullptr;
    }
    auto give_up = [&](const std::string& what, int error) -> std::shared_ptr<Lane> {
        debug_log("ucx: no TCP lane to " + text + " on rail " + std::to_string(rail) + ": " + what +
                  ": " + errno_text(error) + " [" + where + "]");
        ::close(fd);
        return nullptr;
    };
    if (local != 0) {
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = local;
        if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0) {
            return give_up("bind()", errno);
        }
    }
    set_no_delay(fd);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = remote;
    to.sin_port = htons(peer.port);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
        if (errno != EINPROGRESS) {
            return give_up("connect()", errno);
        }
        // The peer's kernel completes the connection from its listen queue: no wait for the peer.
        pollfd wait{fd, POLLOUT, 0};
        int ready = 0;
        do {
            ready = ::poll(&wait, 1, connect_timeout_ms);
        } while (ready < 0 && errno == EINTR);
        if (ready <= 0) {
            return give_up("connect()", ready == 0 ? ETIMEDOUT : errno);
        }
        int error = 0;
        socklen_t length = sizeof error;
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
            return give_up("connect()", error != 0 ? error : errno);
        }
    }
    auto lane = std::make_shared<Lane>(fd, peer.token,
                                       "peer " + text + " (rail " + std::to_string(rail) + ")",
                                       device == "lo", &sending_lanes_);
    rails::Notice hello;
    hello.target = peer.token;
    hello.from = token_;
    hello.round = rail;
    try {
        (void)lane->notify(hello, nullptr, 0, where, LaneFrame::introduce_frame);
    } catch (const std::exception& e) {
        debug_log(std::string("ucx: no TCP lane: ") + e.what());
        return nullptr;
    }
    outgoing_[{rail, peer.token}] = lane;
    all_outgoing_.push_back(lane);
    debug_log("ucx: TCP lane to " + text + " on rail " + std::to_string(rail) + " (" + device +
              ") [" + where + "]");
    return lane;
}

void TcpLanes::drain(double seconds) noexcept {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (sending() && std::chrono::steady_clock::now() < end) {
        if (!progress()) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    }
}

bool TcpLanes::progress() noexcept {
    bool moved = false;
    if (sending_lanes_.load(std::memory_order_relaxed) != 0) {
        // Not behind a connect() in open(): a send's own wait flushes its lane too.
        std::unique_lock<std::mutex> lock(open_mutex_, std::try_to_lock);
        if (lock.owns_lock()) {
            for (const auto& lane : all_outgoing_) {
                moved = lane->flush() || moved;
            }
        }
    }
    if (epoll_ < 0) {
        return moved;
    }
    std::unique_lock<std::mutex> lock(receive_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
        return moved; // another thread reads
    }
    constexpr int batch = 16;
    epoll_event events[batch];
    const int ready = ::epoll_wait(epoll_, events, batch, 0);
    for (int i = 0; i < ready; ++i) {
        if (events[i].data.ptr == nullptr) {
            moved = accept_all() || moved;
            continue;
        }
        auto* in = static_cast<Incoming*>(events[i].data.ptr);
        if (!read(*in, moved)) {
            close_incoming(*in);
            incoming_.remove_if([in](const Incoming& x) { return &x == in; });
        }
    }
    // After the events: they point at the Incoming records this may remove. Checked every
    // second, every 100 ms beyond max_strangers, every time beyond hard_strangers.
    const std::size_t strangers = strangers_.load(std::memory_order_relaxed);
    if (strangers > 0) {
        const auto since = std::chrono::steady_clock::now() - strangers_checked_;
        if (strangers > hard_strangers ||
            (strangers > max_strangers && since >= std::chrono::milliseconds(100)) ||
            since >= std::chrono::seconds(1)) {
            moved = turn_away_strangers() || moved;
        }
    }
    return moved;
}

bool TcpLanes::turn_away_strangers() noexcept {
    bool moved = false;
    const auto now = std::chrono::steady_clock::now();
    strangers_checked_ = now;
    // incoming_ is in the order of acceptance: the oldest strangers go first.
    for (auto it = incoming_.begin(); it != incoming_.end();) {
        if (it->peer_token != 0) {
            ++it;
            continue;
        }
        // A lane whose introduction waits in its socket (more sockets were ready than one
        // progress handles) is no stranger.
        bool close = !read(*it, moved);
        if (!close && it->peer_token == 0) {
            const auto silent = now - it->accepted;
            const std::size_t count = strangers_.load(std::memory_order_relaxed);
            close = silent >= std::chrono::seconds(stranger_seconds) || count > hard_strangers ||
                    (count > max_strangers && silent >= std::chrono::seconds(1));
            if (close) {
                debug_log("ucx: a connection to the TCP lanes' listener did not introduce "
                          "itself: closed");
            }
        }
        if (close) {
            close_incoming(*it);
            it = incoming_.erase(it);
        } else {
            ++it;
        }
    }
    return moved;
}

bool TcpLanes::accept_all() noexcept {
    bool accepted = false;
    // A bounded batch (the rest waits in the listen queue for the next progress), so that
    // progress() can turn strangers away in between.
    for (std::size_t batch = 0; batch < max_strangers; ++batch) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            return accepted; // EAGAIN, or out of descriptors: the peer's data waits in the queue
        }
        accepted = true;
        try {
            incoming_.emplace_back();
        } catch (const std::bad_alloc&) {
            ::close(fd);
            return accepted;
        }
        Incoming& in = incoming_.back();
        in.fd = fd;
        in.accepted = std::chrono::steady_clock::now();
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.ptr = &in;
        if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
            ::close(fd);
            incoming_.pop_back();
            continue;
        }
        strangers_.fetch_add(1, std::memory_order_relaxed);
    }
    return accepted;
}

bool TcpLanes::read(Incoming& in, bool& moved) noexcept {
    for (std::size_t budget = turn_bytes; budget > 0;) {
        ssize_t n = 0;
        const std::size_t left = std::min(in.data_bytes - in.data_read, budget);
        switch (in.data) {
        case Incoming::Data::none:
            n = ::recv(in.fd, reinterpret_cast<char*>(&in.frame) + in.header_bytes,
                       sizeof(LaneFrame) - in.header_bytes, MSG_DONTWAIT);
            break;
        case Incoming::Data::direct:
            // The window may be closing (Registry::detach): then the rest is dropped.
            if (std::byte* into = registry_.begin_copy(in.frame.piece, in.data_read)) {
                n = ::recv(in.fd, into, left, MSG_DONTWAIT);
                const int error = errno;
                registry_.end_copy(in.frame.piece);
                errno = error;
            } else {
                registry_.received(in.frame.piece, in.data_read, false);
                in.data = Incoming::Data::dropped;
                continue;
            }
            break;
        case Incoming::Data::held:
            n = ::recv(in.fd, in.held.data() + in.data_read, left, MSG_DONTWAIT);
            break;
        case Incoming::Data::dropped:
            if (scratch_.empty()) {
                try {
                    scratch_.resize(scratch_bytes);
                } catch (const std::bad_alloc&) {
                    return false;
                }
            }
            n = ::recv(in.fd, scratch_.data(), std::min(left, scratch_.size()), MSG_DONTWAIT);
            break;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return true;
        }
        if (n <= 0) {
            return false; // the stream ended: the peer closed or died
        }
        moved = true;
        budget -= std::min(budget, static_cast<std::size_t>(n));
        if (in.data != Incoming::Data::none) {
            in.data_read += static_cast<std::size_t>(n);
            if (in.data_read == in.data_bytes) {
                deliver(in);
            }
            continue;
        }
        in.header_bytes += static_cast<std::size_t>(n);
        if (in.header_bytes < sizeof(LaneFrame)) {
            continue;
        }
        in.header_bytes = 0;
        const LaneFrame& frame = in.frame;
        if (frame.magic != LaneFrame::magic_value) {
            debug_log("ucx: a TCP lane sent no pmr frame: closed");
            return false;
        }
        if (in.peer_token == 0) {
            // The first frame introduces the lane.
            if (frame.kind != LaneFrame::introduce_frame || frame.piece.notice.target != token_ ||
                frame.piece.notice.from == 0 || frame.bytes != 0) {
                debug_log("ucx: a TCP lane for another process or from no pmr process: closed");
                return false;
            }
            in.peer_token = frame.piece.notice.from;
            strangers_.fetch_sub(1, std::memory_order_relaxed);
            continue;
        }
        const bool early = (frame.piece.notice.flags & rails::early_flag) != 0;
        if ((frame.kind != LaneFrame::piece_frame && frame.kind != LaneFrame::notice_frame) ||
            ((frame.kind == LaneFrame::notice_frame || early) &&
             frame.bytes > rails::ahead_bytes)) {
            debug_log("ucx: a TCP lane sent a malformed frame: closed");
            return false;
        }
        in.data_bytes = frame.bytes;
        in.data_read = 0;
        in.into = nullptr;
        if (frame.kind == LaneFrame::notice_frame || early) {
            // A notice with a small round's data, or a piece ahead of its round: the registry
            // copies them (and keeps what came early).
            in.data = Incoming::Data::held;
            try {
                in.held.resize(frame.bytes);
            } catch (const std::bad_alloc&) {
                return false;
            }
        } else {
            in.into = registry_.destination(frame.piece, frame.bytes);
            in.data = in.into != nullptr ? Incoming::Data::direct : Incoming::Data::dropped;
        }
        if (in.data_bytes == 0) {
            deliver(in);
        }
    }
    return true; // more at the next progress (the socket stays readable)
}

void TcpLanes::deliver(Incoming& in) noexcept {
    const LaneFrame& frame = in.frame;
    frames_.fetch_add(1, std::memory_order_relaxed);
    switch (in.data) {
    case Incoming::Data::direct:
        registry_.received(frame.piece, in.data_bytes, true);
        break;
    case Incoming::Data::held:
        if (frame.kind == LaneFrame::notice_frame) {
            // No notice a sender sends has an answer (the registry answers only receivers'
            // notices).
            (void)registry_.handle(frame.piece.notice, in.held.data(), in.data_bytes);
        } else {
            registry_.landed(frame.piece, in.held.data(), in.data_bytes);
        }
        break;
    case Incoming::Data::none:
    case Incoming::Data::dropped:
        break;
    }
    in.data = Incoming::Data::none;
}

void TcpLanes::close_incoming(Incoming& in) noexcept {
    if (in.data == Incoming::Data::direct) {
        registry_.received(in.frame.piece, in.data_read, false);
    }
    in.data = Incoming::Data::none;
    (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, in.fd, nullptr);
    ::close(in.fd);
    if (in.peer_token != 0) {
        mark_lost(in.peer_token);
    } else {
        strangers_.fetch_sub(1, std::memory_order_relaxed);
    }
}

void TcpLanes::mark_lost(std::uint64_t token) noexcept {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    try {
        lost_.insert(token);
        any_lost_.store(true, std::memory_order_release);
    } catch (const std::bad_alloc&) { // NOLINT(bugprone-empty-catch)
        // The connection's own checks (UCX, pidfd, PMR_TIMEOUT) still find the peer gone.
    }
}

bool TcpLanes::lost(std::uint64_t token) const noexcept {
    if (!any_lost_.load(std::memory_order_acquire)) {
        return false;
    }
    std::lock_guard<std::mutex> lock(lost_mutex_);
    return lost_.count(token) != 0;
}

} // namespace pmr::detail::ucx
