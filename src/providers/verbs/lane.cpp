// SPDX-License-Identifier: MIT
#include "providers/verbs/lane.hpp"

#include "base/backoff.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"
#include "rails/process_holder.hpp"

#include <arpa/inet.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <utility>

namespace pmr::detail::verbs {
namespace {

constexpr std::size_t cells_per_chunk = 256;
constexpr int cq_entries_wanted = 32768;
constexpr int poll_batch = 32;
/// Marks a completion that broke the notice protocol (no verbs status of its own).
constexpr ibv_wc_status protocol_failure = IBV_WC_BAD_RESP_ERR;

std::uint32_t random_psn() {
    static std::mutex mutex;
    static std::mt19937 generator{std::random_device{}()};
    std::lock_guard<std::mutex> lock(mutex);
    return generator() & 0xffffffU;
}

} // namespace

// -------------------------------------------------------------------------------------------------
// Registered memory
// -------------------------------------------------------------------------------------------------

void KeyTable::add(std::size_t rail, const void* address, std::size_t bytes, std::uint32_t lkey) {
    const auto start = reinterpret_cast<std::uintptr_t>(address);
    std::lock_guard<std::mutex> lock(mutex_);
    rails_[rail].emplace(start, Entry{start + bytes, lkey});
}

void KeyTable::remove(std::size_t rail, const void* address, std::uint32_t lkey) noexcept {
    const auto start = reinterpret_cast<std::uintptr_t>(address);
    std::lock_guard<std::mutex> lock(mutex_);
    auto range = rails_[rail].equal_range(start);
    for (auto it = range.first; it != range.second; ++it) {
        if (it->second.lkey == lkey) {
            rails_[rail].erase(it);
            return;
        }
    }
}

bool KeyTable::find(std::size_t rail, const void* address, std::size_t bytes,
                    std::uint32_t* lkey) const noexcept {
    const auto start = reinterpret_cast<std::uintptr_t>(address);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto& table = rails_[rail];
    for (auto it = table.upper_bound(start); it != table.begin();) {
        --it;
        if (it->second.end >= start + bytes) {
            *lkey = it->second.lkey;
            return true;
        }
    }
    return false;
}

Memory::Memory(std::shared_ptr<KeyTable> keys, std::size_t rail, const Rail& on, void* address,
               std::size_t bytes, const std::string& where)
    : keys_(std::move(keys)), rail_(rail), data_(static_cast<std::byte*>(address)), bytes_(bytes),
      owned_(address == nullptr) {
    if (owned_) {
        // Anonymous pages are zeroed and page-aligned: no registration shares a page with the
        // user's heap.
        void* pages =
            mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (pages == MAP_FAILED) {
            raise_system("mmap", errno, where);
        }
        data_ = static_cast<std::byte*>(pages);
    }
    try {
        region_ = MemoryRegion(on.pd, data_, bytes_, on.name, where);
        keys_->add(rail_, data_, bytes_, region_.lkey());
    } catch (...) {
        region_ = MemoryRegion();
        if (owned_) {
            munmap(data_, bytes_);
        }
        throw;
    }
}

Memory::~Memory() {
    keys_->remove(rail_, data_, region_.lkey());
    region_ = MemoryRegion(); // deregistered before the pages go
    if (owned_) {
        munmap(data_, bytes_);
    }
}

RemoteRegion Memory::region() const noexcept {
    RemoteRegion r;
    r.address = reinterpret_cast<std::uintptr_t>(data_);
    r.bytes = bytes_;
    r.rkey = region_.rkey();
    return r;
}

// -------------------------------------------------------------------------------------------------
// Requests
// -------------------------------------------------------------------------------------------------

bool Request::done(const char* /*call*/, const std::string& where) {
    if (!lane_) {
        return true;
    }
    if (lane_->completed(ticket_)) {
        lane_.reset();
        return true;
    }
    if (lane_->failed()) {
        const std::shared_ptr<Lane> lane = std::move(lane_);
        lane->raise_failure(where);
    }
    return false;
}

// -------------------------------------------------------------------------------------------------
// Lane
// -------------------------------------------------------------------------------------------------

namespace {
constexpr std::size_t ring_bytes = std::size_t{ring_slots} * notice_slot_bytes;
constexpr std::size_t lane_memory_bytes = 2 * ring_bytes + 2 * copy_channel::cache_line;
} // namespace

Lane::Lane(VerbsProcess& process, std::size_t rail, const std::string& where)
    : process_(process), rail_(rail),
      memory_(std::make_unique<Memory>(process.keys(), rail, process.rail(rail), nullptr,
                                       lane_memory_bytes, where)),
      qp_(process.rail(rail).pd, process.rail(rail).cq, {send_depth, ring_slots, inline_wanted},
          process.rail(rail).name, where) {
    const Rail& r = process.rail(rail);
    if (qp_.inline_bytes() < inline_needed) {
        raise<ProviderError>(
            "device " + r.name + " sends at most " + std::to_string(qp_.inline_bytes()) +
                " B inline, the verbs provider needs " + std::to_string(inline_needed),
            where, "Use another provider (PMR_PROVIDER=ucx) with this device.");
    }
    ring_ = memory_->data();
    staging_ = ring_ + ring_bytes;
    credit_in_ = new (staging_ + ring_bytes) std::atomic<std::uint64_t>(0);
    credit_out_ = new (staging_ + ring_bytes + copy_channel::cache_line) std::uint64_t(0);

    const Transition init = init_transition(r.port.number);
    auto attr = init.attr;
    check_call(ibv_modify_qp(qp_.get(), &attr, init.mask), "ibv_modify_qp (to INIT)", r.name,
               where);
    // Receives may be posted from INIT on: the peer can write as soon as both sides are RTR.
    std::vector<ibv_recv_wr> receives(ring_slots);
    for (std::size_t i = 0; i < receives.size(); ++i) {
        receives[i] = ibv_recv_wr{};
        receives[i].next = i + 1 < receives.size() ? &receives[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    check_call(ibv_post_recv(qp_.get(), receives.data(), &bad), "ibv_post_recv", r.name, where);

    std::memcpy(local_.gid, r.gid, sizeof local_.gid);
    local_.lid = r.lid;
    local_.mtu = r.mtu;
    local_.link_layer = r.link_layer;
    local_.global = r.global ? 1 : 0;
    local_.qpn = qp_.number();
    local_.psn = random_psn();
    const RemoteRegion mine = memory_->region();
    local_.ring_address = mine.address;
    local_.ring_rkey = mine.rkey;
    local_.ring_slots = ring_slots;
    local_.credit_address = reinterpret_cast<std::uintptr_t>(credit_in_);
    local_.credit_rkey = mine.rkey;
}

Lane::~Lane() {
    process_.remove_lane(rail_, qp_.number());
}

const std::string& Lane::device() const noexcept {
    return process_.rail(rail_).name;
}

void Lane::connect(const LaneAddress& peer, const std::string& where) {
    const Rail& r = process_.rail(rail_);
    if (peer.link_layer != local_.link_layer) {
        raise<ProviderError>(
            std::string("this side's port ") + r.name + " is " +
                (local_.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") +
                ", the peer's is not",
            where, "Give both sides ports of the same fabric in PMR_VERBS_DEVICES.");
    }
    if (peer.ring_slots != ring_slots) {
        raise<ProviderError>("the peer's notice ring has " + std::to_string(peer.ring_slots) +
                                 " slots, this side's " + std::to_string(ring_slots),
                             where, "Link every rank against the same pmr version.");
    }
    peer_ = peer;
    peer_ring_ = {peer.ring_address, std::uint64_t{peer.ring_slots} * notice_slot_bytes,
                  peer.ring_rkey};
    peer_credit_ = {peer.credit_address, sizeof(std::uint64_t), peer.credit_rkey};
    const Transition rtr = rtr_transition(local_, peer, r.port.number, r.gid_index);
    auto rtr_attr = rtr.attr;
    check_call(ibv_modify_qp(qp_.get(), &rtr_attr, rtr.mask), "ibv_modify_qp (to RTR)", r.name,
               where,
               "The peer's port may be unreachable from " + r.name + " (path MTU " +
                   mtu_text(rtr.attr.path_mtu) + ").");
    const Transition rts = rts_transition(local_);
    auto rts_attr = rts.attr;
    check_call(ibv_modify_qp(qp_.get(), &rts_attr, rts.mask), "ibv_modify_qp (to RTS)", r.name,
               where);
    std::lock_guard<std::mutex> lock(mutex_);
    connected_ = true;
}

bool Lane::room_locked() const noexcept {
    return posted_ - completed_.load(std::memory_order_acquire) < send_depth - 1;
}

bool Lane::notice_possible_locked() const noexcept {
    return connected_ && room_locked() &&
           notices_sent_ < credit_in_->load(std::memory_order_acquire) + peer_.ring_slots;
}

void Lane::post_locked(ibv_send_wr& request, bool signal, const std::string& where) {
    const bool signalled = signal || unsignalled_ + 1 >= send_depth / 4;
    request.wr_id = posted_ + 1; // 0 marks receives
    if (signalled) {
        request.send_flags |= IBV_SEND_SIGNALED;
    }
    ibv_send_wr* bad = nullptr;
    check_call(ibv_post_send(qp_.get(), &request, &bad), "ibv_post_send", device(), where);
    ++posted_;
    unsignalled_ = signalled ? 0 : unsignalled_ + 1;
}

Request Lane::write(const void* source, std::size_t bytes, const RemoteRegion& region,
                    std::uint64_t address, const std::string& where) {
    if (!region.covers(address, bytes)) {
        raise<ProviderError>("a write of " + std::to_string(bytes) + " B to " +
                                 std::to_string(address) +
                                 " falls outside the peer's registered region",
                             where, "Please report this as a pmr bug.");
    }
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(source);
    sge.length = static_cast<std::uint32_t>(bytes);
    const bool inlined = bytes <= qp_.inline_bytes();
    if (!inlined && !process_.keys()->find(rail_, source, bytes, &sge.lkey)) {
        raise<ProviderError>("the source of a write of " + std::to_string(bytes) +
                                 " B is not memory registered on " + device(),
                             where, "Please report this as a pmr bug.");
    }
    ibv_send_wr request{};
    request.opcode = IBV_WR_RDMA_WRITE;
    request.sg_list = &sge;
    request.num_sge = bytes > 0 ? 1 : 0;
    request.send_flags = inlined ? IBV_SEND_INLINE : 0;
    request.wr.rdma.remote_addr = address;
    request.wr.rdma.rkey = region.rkey;
    Backoff backoff;
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            // Behind queued notices: the lane keeps the order of everything issued on it.
            if (outbox_.empty() && room_locked()) {
                post_locked(request, !inlined, where);
                if (inlined) {
                    return {};
                }
                return {shared_from_this(), posted_};
            }
        }
        if (failed()) {
            raise_failure(where);
        }
        progress();
        flush();
        backoff.pause();
    }
}

void Lane::notice(const Notice& notice, const void* data, std::size_t bytes, bool wait,
                  const std::string& where) {
    if (bytes > copy_channel::inline_capacity) {
        raise<ProviderError>("a notice with " + std::to_string(bytes) + " B of data", where,
                             "Please report this as a pmr bug.");
    }
    Backoff backoff;
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (outbox_.empty() && notice_possible_locked()) {
                send_notice_locked(notice, data, bytes, where);
                return;
            }
            if (!wait) {
                Pending pending{notice, {}};
                const auto* p = static_cast<const std::byte*>(data);
                pending.data.assign(p, p + bytes);
                outbox_.push_back(std::move(pending));
                return;
            }
        }
        if (failed()) {
            raise_failure(where);
        }
        progress();
        flush();
        backoff.pause();
    }
}

void Lane::send_notice_locked(const Notice& notice, const void* data, std::size_t bytes,
                              const std::string& where) {
    const std::uint64_t sequence = notices_sent_;
    const auto slot = static_cast<std::size_t>(sequence % peer_.ring_slots);
    // The staging slot is free: the peer has read the notice that used it last (its credit says
    // so), so the device has long read it too.
    std::byte* staging = staging_ + slot * notice_slot_bytes;
    std::memcpy(staging, &notice, sizeof notice);
    if (bytes > 0) {
        std::memcpy(staging + sizeof notice, data, bytes);
    }
    const std::size_t total = sizeof notice + bytes;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(staging);
    sge.length = static_cast<std::uint32_t>(total);
    sge.lkey = memory_->lkey();
    ibv_send_wr request{};
    request.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    request.imm_data = htonl(encode_immediate(sequence, bytes));
    request.sg_list = &sge;
    request.num_sge = 1;
    request.send_flags = total <= qp_.inline_bytes() ? IBV_SEND_INLINE : 0;
    request.wr.rdma.remote_addr = peer_ring_.address + slot * notice_slot_bytes;
    request.wr.rdma.rkey = peer_ring_.rkey;
    post_locked(request, false, where);
    ++notices_sent_;
}

void Lane::return_credits_locked(const std::string& where) {
    *credit_out_ = credits_to_return_.load(std::memory_order_relaxed);
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(credit_out_);
    sge.length = sizeof *credit_out_;
    sge.lkey = memory_->lkey();
    ibv_send_wr request{};
    request.opcode = IBV_WR_RDMA_WRITE;
    request.sg_list = &sge;
    request.num_sge = 1;
    request.send_flags = IBV_SEND_INLINE;
    request.wr.rdma.remote_addr = peer_credit_.address;
    request.wr.rdma.rkey = peer_credit_.rkey;
    post_locked(request, false, where);
    credit_due_ = false;
}

void Lane::flush() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
        while (!outbox_.empty() && notice_possible_locked()) {
            const Pending& p = outbox_.front();
            send_notice_locked(p.notice, p.data.data(), p.data.size(), device());
            outbox_.pop_front();
        }
        if (credit_due_ && connected_ && room_locked()) {
            return_credits_locked(device());
        }
    } catch (const std::exception&) {
        fail(IBV_WC_GENERAL_ERR, "ibv_post_send");
    }
}

void Lane::probe() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!connected_ || !room_locked()) {
        return;
    }
    // A write of nothing: it fails (IBV_WC_RETRY_EXC_ERR) when the peer's side is gone.
    ibv_send_wr request{};
    request.opcode = IBV_WR_RDMA_WRITE;
    request.num_sge = 0;
    request.send_flags = IBV_SEND_INLINE;
    request.wr.rdma.remote_addr = peer_credit_.address;
    request.wr.rdma.rkey = peer_credit_.rkey;
    try {
        post_locked(request, false, device());
    } catch (const std::exception&) {
        fail(IBV_WC_GENERAL_ERR, "ibv_post_send");
    }
}

void Lane::progress() noexcept {
    process_.poll(rail_);
}

void Lane::complete(const ibv_wc& completion) noexcept {
    if (completion.wr_id == 0) {
        receive(completion);
        return;
    }
    if (completion.status != IBV_WC_SUCCESS) {
        fail(completion.status, "RDMA write");
        return;
    }
    // Completions of one send queue come in order; a signalled one completes all before it.
    completed_.store(completion.wr_id, std::memory_order_release);
}

void Lane::receive(const ibv_wc& completion) noexcept {
    if (completion.status != IBV_WC_SUCCESS) {
        fail(completion.status, "notice receive");
        return;
    }
    const Immediate immediate = decode_immediate(ntohl(completion.imm_data));
    if (completion.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
        !immediate_fits(immediate, notices_received_)) {
        fail(protocol_failure, "notice receive (out of sequence)");
        return;
    }
    const std::byte* slot = ring_ + (notices_received_ % ring_slots) * notice_slot_bytes;
    Notice notice;
    std::memcpy(&notice, slot, sizeof notice);
    ++notices_received_;
    const auto answer =
        process_.registry().handle(notice, slot + sizeof notice, immediate.data_bytes);
    if (answer) {
        try {
            // Behind everything this lane wrote before, in particular earlier rounds' payloads.
            this->notice(*answer, nullptr, 0, false, device());
        } catch (const std::exception&) {
            // No acknowledgement: the receiver's wait for it is bounded.
        }
    }
    if (notices_received_ - receives_returned_ >= ring_slots / 2U) {
        repost_receives(static_cast<std::uint32_t>(notices_received_ - receives_returned_));
        receives_returned_ = notices_received_;
        credits_to_return_.store(receives_returned_, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(mutex_);
        credit_due_ = true;
        if (room_locked()) {
            try {
                return_credits_locked(device());
            } catch (const std::exception&) {
                fail(IBV_WC_GENERAL_ERR, "ibv_post_send");
            }
        }
    }
}

void Lane::repost_receives(std::uint32_t count) noexcept {
    ibv_recv_wr receives[ring_slots];
    for (std::uint32_t i = 0; i < count; ++i) {
        receives[i] = ibv_recv_wr{};
        receives[i].next = i + 1 < count ? &receives[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(qp_.get(), receives, &bad) != 0) {
        fail(IBV_WC_GENERAL_ERR, "ibv_post_recv");
    }
}

void Lane::fail(ibv_wc_status status, const char* operation) noexcept {
    int expected = 0;
    if (failure_.compare_exchange_strong(expected, static_cast<int>(status),
                                         std::memory_order_acq_rel)) {
        failed_operation_ = operation;
        debug_log(std::string("verbs: ") + operation + " on " + device() +
                  " failed: " + ibv_wc_status_str(status));
    }
}

void Lane::raise_failure(const std::string& where) const {
    raise_completion(static_cast<ibv_wc_status>(failure_.load(std::memory_order_acquire)),
                     failed_operation_, device(), where);
}

// -------------------------------------------------------------------------------------------------
// Process
// -------------------------------------------------------------------------------------------------

const VerbsSettings& verbs_settings() {
    static const VerbsSettings s = read_verbs_settings();
    return s;
}

namespace {

std::string port_state_text(ibv_port_state state) {
    return ibv_port_state_str(state);
}

// The first RoCE v2 entry of the port's GID table, else entry 0.
int roce_gid_index(ibv_context* context, std::uint8_t port, int table_length) {
    for (int i = 0; i < table_length; ++i) {
        ibv_gid_entry entry{};
        if (ibv_query_gid_ex(context, port, static_cast<std::uint32_t>(i), &entry, 0) == 0 &&
            entry.gid_type == IBV_GID_TYPE_ROCE_V2) {
            return i;
        }
    }
    return 0;
}

} // namespace

std::shared_ptr<VerbsProcess> VerbsProcess::create(const std::string& where) {
    return std::make_shared<VerbsProcess>(verbs_settings(), where);
}

VerbsProcess::VerbsProcess(const VerbsSettings& settings, const std::string& where)
    : cells_(registry_, cells_per_chunk) {
    std::vector<Port> ports = settings.ports;
    if (ports.empty()) {
        const std::vector<std::string> active = active_ports();
        if (active.empty()) {
            raise<ProviderError>("the verbs provider found no RDMA device with an active port "
                                 "(libibverbs lists none: no /sys/class/infiniband device, or "
                                 "no driver loaded)",
                                 where,
                                 "Unset PMR_PROVIDER=verbs (the default choice skips verbs "
                                 "without a device) or choose another provider, e.g. "
                                 "PMR_PROVIDER=ucx.");
        }
        if (settings.rails > active.size()) {
            raise<ArgumentError>(std::to_string(settings.rails) + " verbs rails asked for, " +
                                     std::to_string(active.size()) + " active ports found",
                                 where, "Ask for fewer rails (PMR_VERBS_RAILS / PMR_RAILS).");
        }
        for (std::size_t i = 0; i < settings.rails; ++i) {
            std::string why;
            ports.push_back(*parse_port(active[i], &why));
        }
    }
    keys_ = std::make_shared<KeyTable>(ports.size());
    for (const Port& port : ports) {
        Rail rail;
        rail.port = port;
        rail.name = port.name();
        const std::string at =
            where + ", verbs rail " + std::to_string(rails_.size()) + " (" + rail.name + ")";
        rail.context = std::make_shared<Context>(port.device, at);
        ibv_device_attr device{};
        check_call(ibv_query_device(rail.context->get(), &device), "ibv_query_device", rail.name,
                   at);
        ibv_port_attr attr{};
        check_call(ibv_query_port(rail.context->get(), port.number, &attr), "ibv_query_port",
                   rail.name, at, "Does the device have that port (`ibv_devinfo`)?");
        if (attr.state != IBV_PORT_ACTIVE) {
            raise<ProviderError>("port " + rail.name + " is " + port_state_text(attr.state) +
                                     ", not active",
                                 at, "Name an active port in PMR_VERBS_DEVICES (`ibv_devinfo`).");
        }
        rail.pd = std::make_shared<ProtectionDomain>(rail.context, at);
        rail.cq_entries = std::min(cq_entries_wanted, device.max_cqe);
        rail.cq = std::make_shared<CompletionQueue>(rail.context, rail.cq_entries, at);
        rail.lid = attr.lid;
        rail.mtu = static_cast<std::uint8_t>(attr.active_mtu);
        rail.link_layer = static_cast<std::uint8_t>(attr.link_layer == IBV_LINK_LAYER_ETHERNET
                                                        ? IBV_LINK_LAYER_ETHERNET
                                                        : IBV_LINK_LAYER_INFINIBAND);
        rail.global = rail.link_layer == IBV_LINK_LAYER_ETHERNET || settings.gid_index >= 0;
        if (rail.global) {
            rail.gid_index =
                settings.gid_index >= 0
                    ? settings.gid_index
                    : roce_gid_index(rail.context->get(), port.number, attr.gid_tbl_len);
            ibv_gid gid{};
            check_call(ibv_query_gid(rail.context->get(), port.number, rail.gid_index, &gid),
                       "ibv_query_gid", rail.name, at);
            std::memcpy(rail.gid, gid.raw, sizeof rail.gid);
        }
        rails_.push_back(std::move(rail));
    }
    lanes_.resize(rails_.size());
    std::string text;
    for (const Rail& rail : rails_) {
        text += (text.empty() ? "" : ", ") + rail.name +
                (rail.link_layer == IBV_LINK_LAYER_ETHERNET ? " (RoCE)" : " (InfiniBand)");
    }
    debug_log("verbs: " + std::to_string(rails_.size()) + " rail(s): " + text);
}

VerbsProcess::~VerbsProcess() = default;

void VerbsProcess::poll(std::size_t rail) noexcept {
    Rail& r = rails_[rail];
    std::unique_lock<std::mutex> polling(*r.poll_mutex, std::try_to_lock);
    if (!polling.owns_lock()) {
        return; // another thread polls: it hands every completion to its lane
    }
    ibv_wc completions[poll_batch];
    for (;;) {
        const int n = ibv_poll_cq(r.cq->get(), poll_batch, completions);
        if (n <= 0) {
            return;
        }
        for (int i = 0; i < n; ++i) {
            std::shared_ptr<Lane> lane;
            {
                std::lock_guard<std::mutex> lock(lanes_mutex_);
                auto it = lanes_[rail].find(completions[i].qp_num);
                if (it != lanes_[rail].end()) {
                    lane = it->second.lock();
                }
            }
            if (lane) { // else its connection is gone
                lane->complete(completions[i]);
            }
        }
        if (n < poll_batch) {
            return;
        }
    }
}

void VerbsProcess::add_lane(const std::shared_ptr<Lane>& lane) {
    std::lock_guard<std::mutex> lock(lanes_mutex_);
    auto& lanes = lanes_[lane->rail()];
    // Every lane may have a full send queue and ring of completions in the shared queue.
    const auto per_lane = static_cast<std::size_t>(send_depth) + ring_slots;
    const auto entries = static_cast<std::size_t>(rails_[lane->rail()].cq_entries);
    if ((lanes.size() + 1) * per_lane > entries) {
        raise<ProviderError>("more than " + std::to_string(entries / per_lane) +
                                 " verbs connections on " + rails_[lane->rail()].name,
                             "verbs provider",
                             "Use fewer connections per process, or another provider.");
    }
    lanes[lane->qp_number()] = lane;
}

void VerbsProcess::remove_lane(std::size_t rail, std::uint32_t qp_number) noexcept {
    std::lock_guard<std::mutex> lock(lanes_mutex_);
    auto& lanes = lanes_[rail];
    auto it = lanes.find(qp_number);
    if (it != lanes.end() && it->second.expired()) {
        lanes.erase(it);
    }
}

// -------------------------------------------------------------------------------------------------
// Memory and credit cells
// -------------------------------------------------------------------------------------------------

std::shared_ptr<Memory> VerbsProcess::allocate(std::size_t rail, std::size_t bytes,
                                               const std::string& where) {
    return std::make_shared<Memory>(keys_, rail, rails_[rail], nullptr, bytes, where);
}

std::shared_ptr<Memory> VerbsProcess::map(std::size_t rail, void* address, std::size_t bytes,
                                          const std::string& where) {
    return std::make_shared<Memory>(keys_, rail, rails_[rail], address, bytes, where);
}

CreditCell VerbsProcess::acquire_cell(const std::string& where) {
    return cells_.acquire([&](std::size_t bytes) { return allocate(0, bytes, where); }, where);
}

Blob VerbsProcess::cell_key(const CreditCell& cell) const {
    return cells_.key(
        cell, [](const std::shared_ptr<Memory>& chunk) { return pack_region(chunk->region()); });
}

void* VerbsProcess::allocate_window(std::size_t bytes, const std::string& where) {
    return keep_window(allocate(0, bytes, where));
}

} // namespace pmr::detail::verbs
