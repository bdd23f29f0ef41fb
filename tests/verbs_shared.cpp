// SPDX-License-Identifier: MIT
// An RDMA device shared between the processes of one test launch, for running the verbs provider
// between two MPI ranks on a machine without one. As verbs_loopback.cpp, the test executable
// defines (and exports) the libibverbs functions the provider calls, and the data path reaches the
// device through the context's function table. Unlike it, the device's state lives in a shared
// mapping that every rank of the launch maps: queue pairs, receive queues, completion queues and
// memory regions, each recorded with the process it belongs to, under one process-shared mutex.
//
// What crosses the address spaces is what crosses the wire on a real fabric:
//   - a write finds the peer's queue pair by the number the hello carried (RTR recorded it) and
//     must reach it at the LID of its port; it is accepted only if the two queue pairs name each
//     other and the sender's PSN is the one the receiver expects, else the sender fails (retries
//     exhausted);
//   - a write lands only inside a region that the *receiving process* registered under the key
//     the write names, else the sender gets IBV_WC_REM_ACCESS_ERR and both queue pairs fail;
//     the bytes are written into the other process with process_vm_writev, so the remote address
//     must be the peer's own, not one of this process;
//   - a write with immediate consumes a receive the peer posted and completes it on the peer's
//     completion queue; with none posted it waits (receiver not ready, retried forever);
//   - the sender's device executes its send queue in order, when the process polls and on a thread
//     of its own meanwhile (reading non-inline sources then), and its signalled sends complete; a
//     peer process that is gone fails the sender.
// The mapping is named after the launch (launch() below) and PMR_TEST_VERBS_SHARED, the number of
// processes that attach; the last to attach removes the name.
#include "verbs_fake.hpp"
#include <fcntl.h>

#include <infiniband/verbs.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using verbs_fake::lid_of;
using verbs_fake::Operation;

constexpr std::size_t max_pairs = 512;
constexpr std::size_t max_queues = 32;
constexpr std::size_t max_regions = 4096;
constexpr int queue_capacity = verbs_fake::max_cqe;
constexpr std::uint32_t receive_capacity = 256;
constexpr std::uint64_t magic = 0x706d722d76627332; // "pmr-vbs2"

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "verbs_shared: %s\n", what.c_str());
    std::abort();
}

struct SharedRegion {
    bool used;
    pid_t pid;
    std::uint64_t address;
    std::uint64_t bytes;
    std::uint32_t key;
};

struct SharedEntry {
    ibv_wc wc;
    std::uint32_t frees; ///< send-queue slots this completion frees when polled
};

struct SharedQueue {
    bool used;
    pid_t pid;
    int capacity;
    int head;
    int count;
    SharedEntry entries[queue_capacity];
};

struct SharedPair {
    bool used;
    bool failed;
    pid_t pid;
    std::uint32_t qpn;
    ibv_qp_state state;
    std::uint8_t port;
    std::uint32_t dest;
    std::uint16_t dlid; ///< of the port the peer's queue pair should live on
    std::uint32_t send_psn;
    std::uint32_t expected_psn;
    std::uint32_t send_queue; ///< index of the completion queue of sends
    std::uint32_t receive_queue;
    std::uint32_t max_receive;
    std::uint32_t receive_head;
    std::uint32_t receive_count;
    std::uint64_t receives[receive_capacity];
};

struct Shared {
    std::atomic<std::uint64_t> ready;
    pthread_mutex_t mutex;
    int attached;
    std::uint32_t next_key;
    std::uint32_t next_qpn;
    SharedRegion regions[max_regions];
    SharedQueue queues[max_queues];
    SharedPair pairs[max_pairs];
};

struct LocalQueue {
    ibv_cq cq{};
    std::uint32_t index = 0;
};

/// This process's side of a queue pair: the ibv_qp the provider holds and the posted sends.
struct LocalPair {
    ibv_qp qp{};
    std::uint32_t slot = 0; ///< in Shared::pairs
    std::uint32_t max_send = 0;
    std::uint32_t send_slots = 0;  ///< posted and not yet freed by a polled completion
    std::uint32_t unsignalled = 0; ///< executed unsignalled since the last signalled one
    std::deque<Operation> sends;
    std::vector<iovec> gather; ///< of the write being executed, kept for its capacity
};

struct Local {
    Shared* shared = nullptr;
    std::string name;
    int expected = 0;
    ibv_device device{};
    ibv_context context{};
    std::map<std::uint32_t, std::unique_ptr<LocalPair>> pairs; ///< by QP number
};

Local& local() {
    // Never destroyed: pmr releases its verbs objects during exit, after this file's statics.
    static auto* l = new Local; // NOLINT(cppcoreguidelines-owning-memory)
    return *l;
}

class Lock {
public:
    Lock() : mutex_(&local().shared->mutex) {
        if (pthread_mutex_lock(mutex_) == EOWNERDEAD) {
            pthread_mutex_consistent(mutex_); // a rank died inside the device; its pairs stay
        }
    }
    ~Lock() { pthread_mutex_unlock(mutex_); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    Lock(Lock&&) = delete;
    Lock& operator=(Lock&&) = delete;

private:
    pthread_mutex_t* mutex_;
};

void run_device();

void pause_briefly() {
    const timespec step{0, 1000000};
    nanosleep(&step, nullptr);
}

void detach() {
    Local& l = local();
    const Lock lock;
    if (--l.shared->attached == 0) {
        shm_unlink(l.name.c_str()); // nobody else attached: nobody else will find it either
    }
}

// The launch this process belongs to: Open MPI's PMIx namespace, else the launcher process (the
// parent of every rank on a node under Open MPI and MPICH's hydra, unless a tool wraps each rank).
std::string launch() {
    const char* space = std::getenv("PMIX_NAMESPACE");
    if (space == nullptr || *space == '\0') {
        return std::to_string(getppid());
    }
    std::string name;
    for (const char* c = space; *c != '\0'; ++c) {
        name += std::isalnum(static_cast<unsigned char>(*c)) != 0 ? *c : '_';
    }
    return name;
}

// Maps the launch's device, creating it if this process comes first.
void attach() {
    Local& l = local();
    if (l.shared != nullptr) {
        return;
    }
    const char* processes = std::getenv("PMR_TEST_VERBS_SHARED");
    l.expected = processes != nullptr ? std::atoi(processes) : 0;
    if (l.expected < 1) {
        die("PMR_TEST_VERBS_SHARED must give the number of processes sharing the device");
    }
    l.name = "/pmr-test-verbs-" + launch() + "-" + std::to_string(l.expected);
    const auto bytes = static_cast<off_t>(sizeof(Shared));
    bool creator = true;
    int fd = shm_open(l.name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        creator = false;
        fd = shm_open(l.name.c_str(), O_RDWR, 0600);
    }
    if (fd < 0) {
        die("shm_open " + l.name + ": " + std::strerror(errno));
    }
    if (creator && ftruncate(fd, bytes) != 0) {
        die("ftruncate " + l.name + ": " + std::strerror(errno));
    }
    for (int waited = 0;; ++waited) { // the creator sizes it
        struct stat st {};
        if (fstat(fd, &st) == 0 && st.st_size == bytes) {
            break;
        }
        if (waited == 60000) {
            die(l.name + " was never sized");
        }
        pause_briefly();
    }
    // Populated now: completion queues are rings, and pages first touched later would look like
    // memory pmr leaks to the tests that watch the resident size (test_churn).
    void* p =
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        die("mmap " + l.name + ": " + std::strerror(errno));
    }
    auto* shared = static_cast<Shared*>(p);
    if (creator) { // the file is zero-filled: only the mutex and the counters need setting
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&shared->mutex, &attr);
        pthread_mutexattr_destroy(&attr);
        shared->next_key = 100;
        shared->next_qpn = 0x40;
        shared->ready.store(magic, std::memory_order_release);
    }
    for (int waited = 0; shared->ready.load(std::memory_order_acquire) != magic; ++waited) {
        if (waited == 60000) {
            die(l.name + " was never initialised");
        }
        pause_briefly();
    }
    l.shared = shared;
    {
        const Lock lock;
        if (++shared->attached == l.expected) {
            shm_unlink(l.name.c_str()); // all here: the mapping lives on without its name
        }
    }
    std::atexit(&detach);
    // The device works without the process: sends posted before it went into MPI (a barrier, its
    // finalisation) still go out. Never joined; it only ever touches state that is never freed.
    std::thread([] {
        for (;;) {
            {
                const Lock lock;
                run_device();
            }
            pause_briefly();
        }
    }).detach();
}

Shared& shared() {
    return *local().shared;
}

SharedPair* pair_numbered(std::uint32_t qpn) {
    for (SharedPair& p : shared().pairs) {
        if (p.used && p.qpn == qpn) {
            return &p;
        }
    }
    return nullptr;
}

bool registered(pid_t pid, std::uint64_t address, std::size_t bytes, std::uint32_t key) {
    for (const SharedRegion& r : shared().regions) {
        if (r.used && r.pid == pid && r.key == key && address >= r.address && bytes <= r.bytes &&
            address - r.address <= r.bytes - bytes) {
            return true;
        }
    }
    return false;
}

void push(std::uint32_t queue_index, const ibv_wc& wc, std::uint32_t frees) {
    SharedQueue& q = shared().queues[queue_index];
    if (q.count >= q.capacity) {
        die("completion queue overrun"); // a provider bug the test must not survive
    }
    q.entries[(q.head + q.count) % queue_capacity] = {wc, frees};
    ++q.count;
}

ibv_wc completion(std::uint64_t wr_id, ibv_wc_status status, std::uint32_t qpn) {
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.status = status;
    wc.qp_num = qpn;
    return wc;
}

// A queue pair fails: its posted receives are flushed (by whichever process sees the failure).
void fail_shared(SharedPair& pair) {
    if (pair.failed) {
        return;
    }
    pair.failed = true;
    pair.state = IBV_QPS_ERR;
    for (; pair.receive_count > 0; --pair.receive_count) {
        push(pair.receive_queue,
             completion(pair.receives[pair.receive_head], IBV_WC_WR_FLUSH_ERR, pair.qpn), 0);
        pair.receive_head = (pair.receive_head + 1) % receive_capacity;
    }
}

// This process's queue pair fails: the head of its send queue with `first`, the rest flushed.
void fail_local(LocalPair& pair, ibv_wc_status first) {
    SharedPair& sp = shared().pairs[pair.slot];
    fail_shared(sp);
    pair.qp.state = IBV_QPS_ERR;
    for (ibv_wc_status status = first; !pair.sends.empty(); status = IBV_WC_WR_FLUSH_ERR) {
        push(sp.send_queue, completion(pair.sends.front().request.wr_id, status, sp.qpn),
             1 + pair.unsignalled);
        pair.unsignalled = 0;
        pair.sends.pop_front();
    }
}

bool process_gone(pid_t pid) {
    return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH;
}

// Places `data` at `address` in process `pid`; false if that process is gone.
bool place(pid_t pid, std::uint64_t address, std::vector<iovec>& from, std::size_t bytes) {
    if (pid == getpid()) {
        // NOLINTNEXTLINE(performance-no-int-to-ptr): verbs carry addresses as integers
        auto* to = reinterpret_cast<std::byte*>(address);
        for (const iovec& piece : from) {
            std::memcpy(to, piece.iov_base, piece.iov_len);
            to += piece.iov_len;
        }
        return true;
    }
    // NOLINTNEXTLINE(performance-no-int-to-ptr): verbs carry addresses as integers
    iovec to{reinterpret_cast<void*>(address), bytes};
    const ssize_t written =
        process_vm_writev(pid, from.data(), static_cast<unsigned long>(from.size()), &to, 1, 0);
    if (written == static_cast<ssize_t>(bytes)) {
        return true;
    }
    if (written < 0 && errno == ESRCH) {
        return false;
    }
    die("process_vm_writev into process " + std::to_string(pid) +
        " failed: " + (written < 0 ? std::string(std::strerror(errno)) : "short write"));
}

// Executes the head of this process's queue pair's send queue; false if it has to wait.
bool execute(LocalPair& pair) {
    Operation& op = pair.sends.front();
    SharedPair& me = shared().pairs[pair.slot];
    SharedPair* peer = pair_numbered(me.dest);
    if (peer == nullptr || peer->failed || process_gone(peer->pid)) {
        fail_local(pair, IBV_WC_RETRY_EXC_ERR);
        return true;
    }
    if (lid_of(peer->port) != me.dlid) {
        fail_local(pair, IBV_WC_RETRY_EXC_ERR); // no such queue pair behind that port
        return true;
    }
    if (peer->state != IBV_QPS_RTR && peer->state != IBV_QPS_RTS) {
        return false; // the peer drops the packets; the sender retries
    }
    if (peer->dest != me.qpn || peer->expected_psn != me.send_psn) {
        fail_local(pair, IBV_WC_RETRY_EXC_ERR); // never acknowledged
        return true;
    }
    const bool immediate = op.request.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (immediate && peer->receive_count == 0) {
        return false; // receiver not ready: retried forever
    }
    // The sources, read now (not copied: the device's own allocations would blur the resident
    // size that test_churn watches).
    std::vector<iovec>& from = pair.gather;
    from.clear();
    std::size_t bytes = 0;
    if ((op.request.send_flags & IBV_SEND_INLINE) != 0) {
        from.push_back({op.inline_data.data(), op.inline_data.size()});
        bytes = op.inline_data.size();
    } else {
        for (const ibv_sge& sge : op.gather) {
            if (!registered(getpid(), sge.addr, sge.length, sge.lkey)) {
                fail_local(pair, IBV_WC_LOC_PROT_ERR);
                return true;
            }
            // NOLINTNEXTLINE(performance-no-int-to-ptr): verbs carry addresses as integers
            from.push_back({reinterpret_cast<void*>(sge.addr), sge.length});
            bytes += sge.length;
        }
    }
    const std::uint64_t address = op.request.wr.rdma.remote_addr;
    if (bytes > 0) {
        if (!registered(peer->pid, address, bytes, op.request.wr.rdma.rkey)) {
            fail_local(pair, IBV_WC_REM_ACCESS_ERR);
            fail_shared(*peer);
            return true;
        }
        if (!place(peer->pid, address, from, bytes)) {
            fail_local(pair, IBV_WC_RETRY_EXC_ERR);
            return true;
        }
    }
    ++me.send_psn;
    ++peer->expected_psn;
    if (immediate) {
        ibv_wc wc = completion(peer->receives[peer->receive_head], IBV_WC_SUCCESS, peer->qpn);
        peer->receive_head = (peer->receive_head + 1) % receive_capacity;
        --peer->receive_count;
        wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = op.request.imm_data;
        wc.byte_len = static_cast<std::uint32_t>(bytes);
        push(peer->receive_queue, wc, 0);
    }
    if (op.signalled) {
        ibv_wc wc = completion(op.request.wr_id, IBV_WC_SUCCESS, me.qpn);
        wc.opcode = IBV_WC_RDMA_WRITE;
        push(me.send_queue, wc, 1 + pair.unsignalled);
        pair.unsignalled = 0;
    } else {
        ++pair.unsignalled;
    }
    pair.sends.pop_front();
    return true;
}

// The device at work for this process: its queue pairs' sends, in order, as far as they go; the
// sends of a queue pair that failed from the other side are flushed.
void run_device() {
    for (bool moved = true; moved;) {
        moved = false;
        for (auto& [number, pair] : local().pairs) {
            if (shared().pairs[pair->slot].failed && !pair->sends.empty()) {
                fail_local(*pair, IBV_WC_WR_FLUSH_ERR);
            }
            while (!pair->sends.empty() && shared().pairs[pair->slot].state == IBV_QPS_RTS &&
                   execute(*pair)) {
                moved = true;
            }
        }
    }
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    const Lock lock;
    LocalPair& pair = *local().pairs.at(qp->qp_num);
    const SharedPair& sp = shared().pairs[pair.slot];
    for (; wr != nullptr; wr = wr->next) {
        *bad = wr;
        if (sp.state != IBV_QPS_RTS && !sp.failed) {
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
        if (sp.failed) { // a queue pair in the error state flushes what is posted
            push(sp.send_queue, completion(op.request.wr_id, IBV_WC_WR_FLUSH_ERR, sp.qpn), 1);
            continue;
        }
        pair.sends.push_back(std::move(op));
    }
    *bad = nullptr;
    return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    const Lock lock;
    SharedPair& sp = shared().pairs[local().pairs.at(qp->qp_num)->slot];
    for (; wr != nullptr; wr = wr->next) {
        *bad = wr;
        if (sp.state == IBV_QPS_RESET) {
            return EINVAL;
        }
        if (sp.receive_count >= sp.max_receive) {
            return ENOMEM;
        }
        if (sp.failed) {
            push(sp.receive_queue, completion(wr->wr_id, IBV_WC_WR_FLUSH_ERR, sp.qpn), 0);
            continue;
        }
        sp.receives[(sp.receive_head + sp.receive_count) % receive_capacity] = wr->wr_id;
        ++sp.receive_count;
    }
    *bad = nullptr;
    return 0;
}

int poll_cq(ibv_cq* cq, int entries, ibv_wc* wc) {
    const Lock lock;
    run_device();
    SharedQueue& q = shared().queues[static_cast<LocalQueue*>(cq->cq_context)->index];
    int n = 0;
    for (; n < entries && q.count > 0; ++n) {
        const SharedEntry& e = q.entries[q.head];
        wc[n] = e.wc;
        auto it = local().pairs.find(e.wc.qp_num);
        if (e.frees > 0 && it != local().pairs.end()) {
            it->second->send_slots -= e.frees;
        }
        q.head = (q.head + 1) % queue_capacity;
        --q.count;
    }
    return n;
}

} // namespace

// -------------------------------------------------------------------------------------------------
// The libibverbs functions the provider calls
// -------------------------------------------------------------------------------------------------

extern "C" {

ibv_device** ibv_get_device_list(int* count) {
    attach();
    return verbs_fake::device_list(local().device, "shared0", count);
}

ibv_context* ibv_open_device(ibv_device* device) {
    attach();
    Local& l = local();
    l.context.device = device;
    l.context.ops.post_send = &post_send;
    l.context.ops.post_recv = &post_recv;
    l.context.ops.poll_cq = &poll_cq;
    return &l.context;
}

ibv_cq* ibv_create_cq(ibv_context* context, int entries, void* /*user*/,
                      ibv_comp_channel* /*channel*/, int /*vector*/) {
    const Lock lock;
    if (entries < 1 || entries > queue_capacity) {
        errno = EINVAL;
        return nullptr;
    }
    for (std::uint32_t i = 0; i < max_queues; ++i) {
        SharedQueue& q = shared().queues[i];
        if (!q.used) {
            q.used = true;
            q.pid = getpid();
            q.capacity = entries;
            q.head = q.count = 0;
            auto* queue = new LocalQueue;
            queue->index = i;
            queue->cq.context = context;
            queue->cq.cq_context = queue;
            queue->cq.cqe = entries;
            return &queue->cq;
        }
    }
    errno = ENOMEM;
    return nullptr;
}

int ibv_destroy_cq(ibv_cq* cq) {
    const Lock lock;
    auto* queue = static_cast<LocalQueue*>(cq->cq_context);
    shared().queues[queue->index].used = false;
    delete queue;
    return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
    const Lock lock;
    if (attr->qp_type != IBV_QPT_RC || attr->cap.max_inline_data > verbs_fake::max_inline ||
        attr->cap.max_recv_wr > receive_capacity) {
        errno = EINVAL;
        return nullptr;
    }
    for (std::uint32_t i = 0; i < max_pairs; ++i) {
        SharedPair& sp = shared().pairs[i];
        if (sp.used) {
            continue;
        }
        sp = SharedPair{};
        sp.used = true;
        sp.pid = getpid();
        sp.qpn = shared().next_qpn++;
        sp.state = IBV_QPS_RESET;
        sp.send_queue = static_cast<LocalQueue*>(attr->send_cq->cq_context)->index;
        sp.receive_queue = static_cast<LocalQueue*>(attr->recv_cq->cq_context)->index;
        sp.max_receive = attr->cap.max_recv_wr;
        auto pair = std::make_unique<LocalPair>();
        pair->slot = i;
        pair->max_send = attr->cap.max_send_wr;
        pair->qp.context = pd->context;
        pair->qp.pd = pd;
        pair->qp.qp_num = sp.qpn;
        pair->qp.state = IBV_QPS_RESET;
        pair->qp.qp_type = IBV_QPT_RC;
        ibv_qp* qp = &pair->qp;
        local().pairs.emplace(sp.qpn, std::move(pair));
        return qp;
    }
    errno = ENOMEM;
    return nullptr;
}

int ibv_destroy_qp(ibv_qp* qp) {
    const Lock lock;
    auto it = local().pairs.find(qp->qp_num);
    shared().pairs[it->second->slot].used = false;
    local().pairs.erase(it);
    return 0;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
    const Lock lock;
    LocalPair& pair = *local().pairs.at(qp->qp_num);
    SharedPair& sp = shared().pairs[pair.slot];
    if (!verbs_fake::transition_complete(attr->qp_state, mask)) {
        return EINVAL;
    }
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        if (sp.state != IBV_QPS_RESET || attr->port_num < 1 || attr->port_num > verbs_fake::ports) {
            return EINVAL;
        }
        sp.port = attr->port_num;
        break;
    case IBV_QPS_RTR: {
        if (sp.state != IBV_QPS_INIT) {
            return EINVAL;
        }
        // As on a fabric, the peer's queue pair is not looked at yet (it may be gone already, or
        // its process not yet here): the address must name a port, and the writes find out.
        if (attr->ah_attr.dlid < lid_of(1) || attr->ah_attr.dlid > lid_of(verbs_fake::ports)) {
            return EINVAL;
        }
        if (attr->ah_attr.port_num != sp.port) {
            return EINVAL;
        }
        sp.dlid = attr->ah_attr.dlid;
        sp.dest = attr->dest_qp_num;
        sp.expected_psn = attr->rq_psn;
        break;
    }
    case IBV_QPS_RTS:
        if (sp.state != IBV_QPS_RTR) {
            return EINVAL;
        }
        sp.send_psn = attr->sq_psn;
        break;
    default:
        return EINVAL;
    }
    sp.state = attr->qp_state;
    pair.qp.state = attr->qp_state;
    return 0;
}

ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* address, std::size_t bytes, int access) {
    const Lock lock;
    if (!verbs_fake::access_supported(bytes, access)) {
        errno = EINVAL;
        return nullptr;
    }
    for (SharedRegion& r : shared().regions) {
        if (!r.used) {
            auto* mr = new ibv_mr{};
            mr->pd = pd;
            mr->context = pd->context;
            mr->addr = address;
            mr->length = bytes;
            mr->lkey = mr->rkey = shared().next_key++;
            r = {true, getpid(), reinterpret_cast<std::uint64_t>(address), bytes, mr->lkey};
            return mr;
        }
    }
    errno = ENOMEM;
    return nullptr;
}

int ibv_dereg_mr(ibv_mr* mr) {
    const Lock lock;
    for (SharedRegion& r : shared().regions) {
        if (r.used && r.key == mr->lkey) {
            r.used = false;
            break;
        }
    }
    delete mr;
    return 0;
}

} // extern "C"
