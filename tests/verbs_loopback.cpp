// SPDX-License-Identifier: MIT
// An in-process RDMA device for the verbs provider's tests on machines without one. The test
// executable defines the libibverbs functions the provider calls (and exports them, so that they
// take precedence over the library's inside libpmr); the data-path calls (ibv_post_send,
// ibv_post_recv, ibv_poll_cq) reach it through the context's function table, as they reach a
// real driver. It keeps RC semantics within one process:
//   - queue pairs go RESET -> INIT -> RTR -> RTS; RTR checks the peer's QP number and LID, and a
//     write is accepted only if the sender's PSN is the one the receiver expects;
//   - a send queue executes in order and only while completion queues are polled (the device
//     works "later"), reading non-inline sources then, so a source freed too early shows;
//   - a write lands only inside a region registered with the key it names, else the sender gets
//     IBV_WC_REM_ACCESS_ERR and both queue pairs fail;
//   - a write with immediate consumes one posted receive and completes it with the immediate; with
//     no receive posted it waits (receiver-not-ready retries forever);
//   - a failed queue pair flushes everything outstanding (IBV_WC_WR_FLUSH_ERR);
//   - signalled sends complete; send-queue slots of unsignalled ones are freed by the next
//     signalled completion polled, and posting beyond max_send_wr fails with ENOMEM;
//   - verbs_loopback_fail_writes_after(n): the n+1-th write from now fails with
//     IBV_WC_RETRY_EXC_ERR, as a vanished peer makes it.
#include "verbs_fake.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

using verbs_fake::lid_of;
using verbs_fake::Operation;

struct Region {
    std::uintptr_t address;
    std::size_t bytes;
    std::uint32_t key;
};

struct Queue; // a completion queue

struct Pair {
    ibv_qp qp{};
    Queue* send_cq = nullptr;
    Queue* receive_cq = nullptr;
    std::uint32_t max_send = 0;
    std::uint32_t max_receive = 0;
    std::uint8_t port = 0;
    std::uint32_t dest = 0;
    std::uint32_t send_psn = 0;
    std::uint32_t expected_psn = 0;
    std::deque<Operation> sends;   ///< posted, not executed
    std::uint32_t send_slots = 0;  ///< posted and not yet freed by a polled completion
    std::uint32_t unsignalled = 0; ///< executed unsignalled since the last signalled one
    std::deque<std::uint64_t> receives;
    bool failed = false;
};

struct Entry {
    ibv_wc wc{};
    Pair* pair = nullptr;
    std::uint32_t frees = 0; ///< send-queue slots this completion frees when polled
};

struct Queue {
    ibv_cq cq{};
    std::deque<Entry> entries;
    int capacity = 0;
};

struct Device {
    ibv_device device{};
    ibv_context context{};
};

struct State {
    std::recursive_mutex mutex;
    Device device;
    std::vector<Region> regions;
    std::map<std::uint32_t, std::unique_ptr<Pair>> pairs;
    std::uint32_t next_key = 100;
    std::uint32_t next_qpn = 0x40;
    long fail_after = -1;
};

State& state() {
    // Never destroyed: pmr releases its verbs objects during exit, after this file's statics.
    static auto* s = new State; // NOLINT(cppcoreguidelines-owning-memory)
    return *s;
}

bool registered(std::uintptr_t address, std::size_t bytes, std::uint32_t key) {
    for (const Region& r : state().regions) {
        if (r.key == key && address >= r.address && bytes <= r.bytes &&
            address - r.address <= r.bytes - bytes) {
            return true;
        }
    }
    return false;
}

void push(Queue* queue, Pair* pair, const ibv_wc& wc, std::uint32_t frees) {
    if (static_cast<int>(queue->entries.size()) >= queue->capacity) {
        std::abort(); // a completion queue overrun: a provider bug the test must not survive
    }
    queue->entries.push_back({wc, pair, frees});
}

// The queue pair fails: the head of its send queue with `first`, everything else flushed.
void fail_pair(Pair& pair, ibv_wc_status first) {
    if (pair.failed) {
        return;
    }
    pair.failed = true;
    pair.qp.state = IBV_QPS_ERR;
    for (ibv_wc_status status = first; !pair.sends.empty(); status = IBV_WC_WR_FLUSH_ERR) {
        ibv_wc wc{};
        wc.wr_id = pair.sends.front().request.wr_id;
        wc.status = status;
        wc.qp_num = pair.qp.qp_num;
        push(pair.send_cq, &pair, wc, 1 + pair.unsignalled);
        pair.unsignalled = 0;
        pair.sends.pop_front();
    }
    while (!pair.receives.empty()) {
        ibv_wc wc{};
        wc.wr_id = pair.receives.front();
        wc.status = IBV_WC_WR_FLUSH_ERR;
        wc.qp_num = pair.qp.qp_num;
        push(pair.receive_cq, &pair, wc, 0);
        pair.receives.pop_front();
    }
}

// Executes the head of `pair`'s send queue; false if it has to wait.
bool execute(Pair& pair) {
    Operation& op = pair.sends.front();
    auto target = state().pairs.find(pair.dest);
    if (target == state().pairs.end()) {
        fail_pair(pair, IBV_WC_RETRY_EXC_ERR);
        return true;
    }
    Pair& peer = *target->second;
    if (peer.failed) {
        fail_pair(pair, IBV_WC_RETRY_EXC_ERR);
        return true;
    }
    if (peer.qp.state != IBV_QPS_RTR && peer.qp.state != IBV_QPS_RTS) {
        return false; // the peer drops the packets; the sender retries
    }
    if (peer.dest != pair.qp.qp_num || peer.expected_psn != pair.send_psn) {
        fail_pair(pair, IBV_WC_RETRY_EXC_ERR); // never acknowledged
        return true;
    }
    if (state().fail_after == 0) {
        state().fail_after = -1;
        fail_pair(pair, IBV_WC_RETRY_EXC_ERR);
        return true;
    }
    const bool immediate = op.request.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (immediate && peer.receives.empty()) {
        return false; // receiver not ready: retried forever
    }
    if (state().fail_after > 0) {
        --state().fail_after;
    }
    // Gather now, as the device reads the sources when it sends.
    std::vector<std::byte> data = op.inline_data;
    if ((op.request.send_flags & IBV_SEND_INLINE) == 0) {
        for (const ibv_sge& sge : op.gather) {
            if (!registered(sge.addr, sge.length, sge.lkey)) {
                fail_pair(pair, IBV_WC_LOC_PROT_ERR);
                return true;
            }
            // NOLINTNEXTLINE(performance-no-int-to-ptr): verbs carry addresses as integers
            const auto* p = reinterpret_cast<const std::byte*>(sge.addr);
            data.insert(data.end(), p, p + sge.length);
        }
    }
    const std::uint64_t address = op.request.wr.rdma.remote_addr;
    if (!data.empty() && !registered(address, data.size(), op.request.wr.rdma.rkey)) {
        fail_pair(pair, IBV_WC_REM_ACCESS_ERR);
        fail_pair(peer, IBV_WC_WR_FLUSH_ERR);
        return true;
    }
    if (!data.empty()) {
        // NOLINTNEXTLINE(performance-no-int-to-ptr): verbs carry addresses as integers
        std::memcpy(reinterpret_cast<void*>(address), data.data(), data.size());
    }
    ++pair.send_psn;
    ++peer.expected_psn;
    if (immediate) {
        ibv_wc wc{};
        wc.wr_id = peer.receives.front();
        peer.receives.pop_front();
        wc.status = IBV_WC_SUCCESS;
        wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = op.request.imm_data;
        wc.byte_len = static_cast<std::uint32_t>(data.size());
        wc.qp_num = peer.qp.qp_num;
        push(peer.receive_cq, &peer, wc, 0);
    }
    if (op.signalled) {
        ibv_wc wc{};
        wc.wr_id = op.request.wr_id;
        wc.status = IBV_WC_SUCCESS;
        wc.opcode = IBV_WC_RDMA_WRITE;
        wc.qp_num = pair.qp.qp_num;
        push(pair.send_cq, &pair, wc, 1 + pair.unsignalled);
        pair.unsignalled = 0;
    } else {
        ++pair.unsignalled;
    }
    pair.sends.pop_front();
    return true;
}

// The device at work: every queue pair's sends, in order, as far as they can go.
void run_device() {
    for (bool moved = true; moved;) {
        moved = false;
        for (auto& [number, pair] : state().pairs) {
            while (!pair->failed && !pair->sends.empty() && pair->qp.state == IBV_QPS_RTS &&
                   execute(*pair)) {
                moved = true;
            }
        }
    }
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    Pair& pair = *state().pairs.at(qp->qp_num);
    for (; wr != nullptr; wr = wr->next) {
        *bad = wr;
        if (pair.qp.state != IBV_QPS_RTS && !pair.failed) {
            return EINVAL;
        }
        if (pair.send_slots >= pair.max_send) {
            return ENOMEM;
        }
        Operation op;
        if (const int error = verbs_fake::read_request(*wr, op); error != 0) {
            return error;
        }
        ++pair.send_slots;
        if (pair.failed) { // a queue pair in the error state flushes what is posted
            ibv_wc wc{};
            wc.wr_id = op.request.wr_id;
            wc.status = IBV_WC_WR_FLUSH_ERR;
            wc.qp_num = pair.qp.qp_num;
            push(pair.send_cq, &pair, wc, 1);
            continue;
        }
        pair.sends.push_back(std::move(op));
    }
    *bad = nullptr;
    return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    Pair& pair = *state().pairs.at(qp->qp_num);
    for (; wr != nullptr; wr = wr->next) {
        *bad = wr;
        if (pair.qp.state == IBV_QPS_RESET || pair.receives.size() >= pair.max_receive) {
            return pair.qp.state == IBV_QPS_RESET ? EINVAL : ENOMEM;
        }
        pair.receives.push_back(wr->wr_id);
    }
    *bad = nullptr;
    return 0;
}

int poll_cq(ibv_cq* cq, int entries, ibv_wc* wc) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    run_device();
    auto* queue = reinterpret_cast<Queue*>(cq->cq_context);
    int n = 0;
    while (n < entries && !queue->entries.empty()) {
        Entry& e = queue->entries.front();
        wc[n++] = e.wc;
        if (e.frees > 0 && state().pairs.count(e.wc.qp_num) != 0) {
            e.pair->send_slots -= e.frees;
        }
        queue->entries.pop_front();
    }
    return n;
}

} // namespace

/// The next `writes` writes succeed, the one after fails as if the peer had vanished.
void verbs_loopback_fail_writes_after(long writes) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    state().fail_after = writes;
}

// -------------------------------------------------------------------------------------------------
// The libibverbs functions the provider calls
// -------------------------------------------------------------------------------------------------

extern "C" {

ibv_device** ibv_get_device_list(int* count) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    return verbs_fake::device_list(state().device.device, "loop0", count);
}

ibv_context* ibv_open_device(ibv_device* device) {
    Device& d = state().device;
    d.context.device = device;
    d.context.ops.post_send = &post_send;
    d.context.ops.post_recv = &post_recv;
    d.context.ops.poll_cq = &poll_cq;
    return &d.context;
}

ibv_cq* ibv_create_cq(ibv_context* context, int entries, void* /*user*/,
                      ibv_comp_channel* /*channel*/, int /*vector*/) {
    auto* queue = new Queue;
    queue->capacity = entries;
    queue->cq.context = context;
    queue->cq.cq_context = queue;
    queue->cq.cqe = entries;
    return &queue->cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
    delete reinterpret_cast<Queue*>(cq->cq_context);
    return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    if (attr->qp_type != IBV_QPT_RC || attr->cap.max_inline_data > verbs_fake::max_inline) {
        errno = EINVAL;
        return nullptr;
    }
    auto pair = std::make_unique<Pair>();
    pair->qp.context = pd->context;
    pair->qp.pd = pd;
    pair->qp.qp_num = state().next_qpn++;
    pair->qp.state = IBV_QPS_RESET;
    pair->qp.qp_type = IBV_QPT_RC;
    pair->send_cq = reinterpret_cast<Queue*>(attr->send_cq->cq_context);
    pair->receive_cq = reinterpret_cast<Queue*>(attr->recv_cq->cq_context);
    pair->max_send = attr->cap.max_send_wr;
    pair->max_receive = attr->cap.max_recv_wr;
    ibv_qp* qp = &pair->qp;
    state().pairs.emplace(qp->qp_num, std::move(pair));
    return qp;
}

int ibv_destroy_qp(ibv_qp* qp) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    state().pairs.erase(qp->qp_num);
    return 0;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    Pair& pair = *state().pairs.at(qp->qp_num);
    if (!verbs_fake::transition_complete(attr->qp_state, mask)) {
        return EINVAL;
    }
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        if (pair.qp.state != IBV_QPS_RESET || attr->port_num < 1 ||
            attr->port_num > verbs_fake::ports) {
            return EINVAL;
        }
        pair.port = attr->port_num;
        break;
    case IBV_QPS_RTR: {
        if (pair.qp.state != IBV_QPS_INIT) {
            return EINVAL;
        }
        auto peer = state().pairs.find(attr->dest_qp_num);
        // The address must name the port the peer's queue pair lives on.
        if (peer == state().pairs.end() || attr->ah_attr.dlid != lid_of(peer->second->port) ||
            attr->ah_attr.port_num != pair.port) {
            return EINVAL;
        }
        pair.dest = attr->dest_qp_num;
        pair.expected_psn = attr->rq_psn;
        break;
    }
    case IBV_QPS_RTS:
        if (pair.qp.state != IBV_QPS_RTR) {
            return EINVAL;
        }
        pair.send_psn = attr->sq_psn;
        break;
    default:
        return EINVAL;
    }
    pair.qp.state = attr->qp_state;
    return 0;
}

ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* address, std::size_t bytes, int access) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    if (!verbs_fake::access_supported(bytes, access)) {
        errno = EINVAL;
        return nullptr;
    }
    auto* mr = new ibv_mr{};
    mr->pd = pd;
    mr->context = pd->context;
    mr->addr = address;
    mr->length = bytes;
    mr->lkey = mr->rkey = state().next_key++;
    state().regions.push_back({reinterpret_cast<std::uintptr_t>(address), bytes, mr->lkey});
    return mr;
}

int ibv_dereg_mr(ibv_mr* mr) {
    std::lock_guard<std::recursive_mutex> lock(state().mutex);
    auto& regions = state().regions;
    for (auto it = regions.begin(); it != regions.end(); ++it) {
        if (it->key == mr->lkey) {
            regions.erase(it);
            break;
        }
    }
    delete mr;
    return 0;
}

} // extern "C"
