// SPDX-License-Identifier: MIT
/// @file pingpong.cpp
/// `pmr-bench pingpong`: rank 0 sends a message to its partner, which sends it back; the reported
/// time is half the round trip. pmr (library-owned and user receive windows) against MPI
/// persistent send/recv, Isend/Irecv and blocking Send/Recv, interleaved per sample.
///
/// With `--provider self` (or a single rank) rank 0 plays both sides over a connection to itself,
/// with `--provider null` against MPI_PROC_NULL: the cost of the local providers and of the calls.

#include "benchmark.hpp"
#include "buffer.hpp"
#include "mpi_check.hpp"

#include <optional>
#include <string>
#include <vector>

namespace pmr_bench {
namespace {

enum class Role { initiator, responder, loopback, idle };

/// Who this rank talks to. The loopback rank does the ping and the pong itself.
struct Endpoint {
    Role role = Role::idle;
    int rank = 0;
    int peer = MPI_PROC_NULL; ///< partner, own rank (self) or MPI_PROC_NULL (null)
    /// MPI_PROC_NULL delivers nothing, so there is nothing to check.
    bool receives_data() const { return peer != MPI_PROC_NULL; }
};

constexpr int ping_channel = 0;
constexpr int pong_channel = 1;

class PmrPingPong final : public Variant {
public:
    PmrPingPong(const Context& context, Endpoint endpoint, bool owned, int tag, std::size_t rails)
        : Variant(owned ? "pmr-owned" : "pmr-user", Family::pmr,
                  owned ? "pmr windows in library-owned memory"
                        : "pmr windows over user buffers (ordinary heap memory)"),
          endpoint_(endpoint), owned_(owned), rails_(rails) {
        if (endpoint.role != Role::idle) {
            connection_.emplace(
                context.connect(pmr::Target(context.world, endpoint.peer, tag, tag)));
            if (rails_ > connection_->rails()) {
                throw UsageError("--rails " + std::to_string(rails_) + ": the connection has " +
                                 std::to_string(connection_->rails()) + " rail(s) (provider " +
                                 std::string(pmr::to_string(connection_->provider())) + ")");
            }
        }
    }

    void prepare(std::size_t bytes) override {
        bytes_ = bytes;
        receive_ready_ = false;
        if (!connection_) {
            return;
        }
        // --rails N: N equal pieces (cache-line multiples, the last takes the rest), one per rail.
        ranges_.clear();
        std::size_t offset = 0;
        for (std::size_t rail = 0; rail < rails_; ++rail) {
            const std::size_t piece =
                rail + 1 == rails_ ? bytes - offset : bytes / rails_ / 64 * 64;
            ranges_.push_back({offset, piece, rail});
            offset += piece;
        }
        if (owned_) {
            send_.emplace(*connection_, bytes);
            recv_.emplace(*connection_, bytes);
        } else {
            send_buffer_ = AlignedBuffer(bytes);
            recv_buffer_ = AlignedBuffer(bytes);
            send_.emplace(*connection_, send_buffer_.data(), bytes);
            recv_.emplace(*connection_, recv_buffer_.data(), bytes);
        }
    }

    void run(std::size_t iterations) override {
        for (std::size_t i = 0; i < iterations; ++i) {
            switch (endpoint_.role) {
            case Role::initiator:
                recv_->init();
                send_->init();
                fill_if_verifying(ping_channel);
                post_send();
                recv_->post();
                send_->wait();
                recv_->wait();
                check_if_verifying(pong_channel, "pong at rank 0");
                break;
            case Role::responder:
                // The receive of the next ping is made ready as soon as the pong is out (the
                // ping's data has been used), as a persistent loop does: its credit then travels
                // while the pong does. Making it ready at the start of run() would put a credit
                // round trip behind every sample's barrier into the first ping of the sample, and
                // after send_->wait() the time of that wait into every round.
                if (!receive_ready_) {
                    recv_->init();
                }
                recv_->post();
                recv_->wait();
                check_if_verifying(ping_channel, "ping at the partner");
                send_->init();
                fill_if_verifying(pong_channel);
                post_send();
                recv_->init();
                receive_ready_ = true;
                send_->wait();
                break;
            case Role::loopback:
                for (int channel : {ping_channel, pong_channel}) {
                    recv_->init();
                    send_->init();
                    fill_if_verifying(channel);
                    post_send();
                    recv_->post();
                    send_->wait();
                    recv_->wait();
                    check_if_verifying(channel, "loopback");
                }
                break;
            case Role::idle:
                break;
            }
            next_round();
        }
    }

    void release() override {
        receive_ready_ = false;
        send_.reset();
        recv_.reset();
        send_buffer_ = AlignedBuffer();
        recv_buffer_ = AlignedBuffer();
    }

    void count_providers(ProviderCounts& counts) override {
        if (connection_) {
            counts[static_cast<std::size_t>(connection_->provider())] += 1;
        }
    }

private:
    void post_send() {
        if (rails_ > 1) {
            send_->post(ranges_.data(), ranges_.size());
        } else {
            send_->post();
        }
    }
    void fill_if_verifying(int channel) {
        if (verifying()) {
            fill(send_->data(), bytes_, endpoint_.rank, channel);
        }
    }
    void check_if_verifying(int channel, const char* where) {
        if (verifying() && endpoint_.receives_data()) {
            check(recv_->data(), bytes_, endpoint_.peer, channel, where);
        }
    }

    Endpoint endpoint_;
    bool owned_;
    std::size_t rails_;
    std::vector<pmr::RailSlice> ranges_; // in bytes, the elements of the windows
    std::size_t bytes_ = 0;
    std::optional<pmr::Connection> connection_;
    AlignedBuffer send_buffer_;
    AlignedBuffer recv_buffer_;
    std::optional<pmr::SendWindow<unsigned char>> send_;
    std::optional<pmr::RecvWindow<unsigned char>> recv_;
    bool receive_ready_ = false; ///< responder: recv_ was init()ed after the last pong
};

/// The three MPI baselines differ only in how one message goes out and comes in.
enum class MpiStyle { persistent, isend, send };

class MpiPingPong final : public Variant {
public:
    MpiPingPong(const Context& context, Endpoint endpoint, MpiStyle style)
        : Variant(name_of(style), Family::mpi, description_of(style)), endpoint_(endpoint),
          style_(style), comm_(context.world) {}

    void prepare(std::size_t bytes) override {
        bytes_ = bytes;
        count_ = static_cast<int>(bytes);
        send_buffer_ = AlignedBuffer(bytes);
        recv_buffer_ = AlignedBuffer(bytes);
        if (style_ == MpiStyle::persistent && endpoint_.role != Role::idle) {
            check_mpi(MPI_Send_init(send_buffer_.data(), count_, MPI_BYTE, endpoint_.peer, 0,
                                    comm_.get(), &requests_[1]),
                      "MPI_Send_init");
            check_mpi(MPI_Recv_init(recv_buffer_.data(), count_, MPI_BYTE, endpoint_.peer, 0,
                                    comm_.get(), &requests_[0]),
                      "MPI_Recv_init");
        }
    }

    void run(std::size_t iterations) override {
        for (std::size_t i = 0; i < iterations; ++i) {
            switch (endpoint_.role) {
            case Role::initiator:
                fill_if_verifying(ping_channel);
                exchange_once();
                check_if_verifying(pong_channel, "pong at rank 0");
                break;
            case Role::responder:
                receive_once();
                check_if_verifying(ping_channel, "ping at the partner");
                fill_if_verifying(pong_channel);
                send_once();
                break;
            case Role::loopback:
                for (int channel : {ping_channel, pong_channel}) {
                    fill_if_verifying(channel);
                    exchange_once();
                    check_if_verifying(channel, "loopback");
                }
                break;
            case Role::idle:
                break;
            }
            next_round();
        }
    }

    void release() override {
        for (auto& request : requests_) {
            if (request != MPI_REQUEST_NULL) {
                MPI_Request_free(&request);
            }
        }
        send_buffer_ = AlignedBuffer();
        recv_buffer_ = AlignedBuffer();
    }

private:
    static std::string name_of(MpiStyle style) {
        switch (style) {
        case MpiStyle::persistent:
            return "mpi-persistent";
        case MpiStyle::isend:
            return "mpi-isend";
        case MpiStyle::send:
            return "mpi-send";
        }
        return "";
    }
    static std::string description_of(MpiStyle style) {
        switch (style) {
        case MpiStyle::persistent:
            return "MPI_Send_init/MPI_Recv_init, MPI_Start, MPI_Wait";
        case MpiStyle::isend:
            return "MPI_Isend/MPI_Irecv, MPI_Wait";
        case MpiStyle::send:
            return "blocking MPI_Send/MPI_Recv";
        }
        return "";
    }

    /// Initiator and loopback: receive posted first, then the send, both completed.
    void exchange_once() {
        if (style_ == MpiStyle::persistent) {
            check_mpi(MPI_Startall(2, requests_), "MPI_Startall");
        } else if (style_ == MpiStyle::send && endpoint_.role == Role::initiator) {
            // The classic ping-pong. The loopback rank cannot block in MPI_Send before its
            // receive is posted, so it takes the non-blocking path below.
            send_once();
            receive_once();
            return;
        } else {
            irecv(&requests_[0]);
            check_mpi(MPI_Isend(send_buffer_.data(), count_, MPI_BYTE, endpoint_.peer, 0,
                                comm_.get(), &requests_[1]),
                      "MPI_Isend");
        }
        check_mpi(MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE), "MPI_Waitall");
    }

    void receive_once() {
        switch (style_) {
        case MpiStyle::persistent:
            check_mpi(MPI_Start(&requests_[0]), "MPI_Start");
            check_mpi(MPI_Wait(&requests_[0], MPI_STATUS_IGNORE), "MPI_Wait");
            break;
        case MpiStyle::isend:
            irecv(&requests_[0]);
            check_mpi(MPI_Wait(&requests_[0], MPI_STATUS_IGNORE), "MPI_Wait");
            break;
        case MpiStyle::send:
            check_mpi(MPI_Recv(recv_buffer_.data(), count_, MPI_BYTE, endpoint_.peer, 0,
                               comm_.get(), MPI_STATUS_IGNORE),
                      "MPI_Recv");
            break;
        }
    }

    void send_once() {
        switch (style_) {
        case MpiStyle::persistent:
            check_mpi(MPI_Start(&requests_[1]), "MPI_Start");
            check_mpi(MPI_Wait(&requests_[1], MPI_STATUS_IGNORE), "MPI_Wait");
            break;
        case MpiStyle::isend:
            check_mpi(MPI_Isend(send_buffer_.data(), count_, MPI_BYTE, endpoint_.peer, 0,
                                comm_.get(), &requests_[1]),
                      "MPI_Isend");
            check_mpi(MPI_Wait(&requests_[1], MPI_STATUS_IGNORE), "MPI_Wait");
            break;
        case MpiStyle::send:
            check_mpi(
                MPI_Send(send_buffer_.data(), count_, MPI_BYTE, endpoint_.peer, 0, comm_.get()),
                "MPI_Send");
            break;
        }
    }

    void irecv(MPI_Request* request) {
        check_mpi(MPI_Irecv(recv_buffer_.data(), count_, MPI_BYTE, endpoint_.peer, 0, comm_.get(),
                            request),
                  "MPI_Irecv");
    }

    void fill_if_verifying(int channel) {
        if (verifying()) {
            fill(send_buffer_.data(), bytes_, endpoint_.rank, channel);
        }
    }
    void check_if_verifying(int channel, const char* where) {
        if (verifying() && endpoint_.receives_data()) {
            check(recv_buffer_.data(), bytes_, endpoint_.peer, channel, where);
        }
    }

    Endpoint endpoint_;
    MpiStyle style_;
    DupComm comm_;
    std::size_t bytes_ = 0;
    int count_ = 0;
    AlignedBuffer send_buffer_;
    AlignedBuffer recv_buffer_;
    MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}; ///< receive, send
};

class PingPong final : public Benchmark {
public:
    PingPong(const Options& options, const Context& context) {
        long partner = options.integer("partner");
        bool local_provider =
            context.provider == pmr::Provider::null || context.provider == pmr::Provider::self;
        if (!local_provider && context.size > 1 && (partner < 1 || partner >= context.size)) {
            throw UsageError("--partner must be a rank from 1 to " +
                             std::to_string(context.size - 1));
        }
        endpoint_.rank = context.rank;
        if (local_provider || context.size == 1) {
            // The local providers only serve rank 0 talking to itself or to nobody.
            endpoint_.role = context.rank == 0 ? Role::loopback : Role::idle;
            endpoint_.peer = context.provider == pmr::Provider::null ? MPI_PROC_NULL : 0;
            pair_ = endpoint_.peer == MPI_PROC_NULL ? "rank 0 with MPI_PROC_NULL"
                                                    : "rank 0 with itself";
        } else {
            partner_ = static_cast<int>(partner);
            if (context.rank == 0) {
                endpoint_ = {Role::initiator, 0, partner_};
            } else if (context.rank == partner_) {
                endpoint_ = {Role::responder, partner_, 0};
            } else {
                endpoint_ = {Role::idle, context.rank, MPI_PROC_NULL};
            }
            pair_ = "rank 0 <-> rank " + std::to_string(partner_);
        }
        if (context.size > 2 || (context.size == 2 && endpoint_.role != Role::initiator &&
                                 endpoint_.role != Role::responder)) {
            pair_ += " (other ranks idle)";
        }
        const long rails = options.integer("rails");
        if (rails < 1) {
            throw UsageError("--rails must be at least 1");
        }
        pair_ += rails > 1 ? ", pmr messages split over " + std::to_string(rails) + " rails" : "";
        if (context.wants("pmr-owned")) {
            add(std::make_unique<PmrPingPong>(context, endpoint_, true, 0,
                                              static_cast<std::size_t>(rails)));
        }
        if (context.wants("pmr-user")) {
            add(std::make_unique<PmrPingPong>(context, endpoint_, false, 1,
                                              static_cast<std::size_t>(rails)));
        }
        for (MpiStyle style : {MpiStyle::persistent, MpiStyle::isend, MpiStyle::send}) {
            auto variant = std::make_unique<MpiPingPong>(context, endpoint_, style);
            if (context.wants(variant->name())) {
                add(std::move(variant));
            }
        }
    }

    std::vector<std::pair<std::string, std::string>> describe() const override {
        return {{"pair", pair_}};
    }
    std::string time_meaning() const override {
        return "one-way time = round trip / 2 (slowest rank)";
    }
    double time_divisor() const override { return 2; }

private:
    Endpoint endpoint_;
    int partner_ = 1;
    std::string pair_;
};

void declare(Options& options) {
    options.declare("partner", Arity::one, "RANK", "rank that answers rank 0's pings", {"1"});
    options.declare("rails", Arity::one, "N",
                    "split each pmr message into N pieces over rails 0..N-1 with post(ranges)",
                    {"1"});
}

std::unique_ptr<Benchmark> create(const Options& options, const Context& context) {
    return std::make_unique<PingPong>(options, context);
}

const bool registered = register_benchmark(
    {"pingpong", "two ranks send a message back and forth: latency and bandwidth", "0 8:16M",
     declare, create});

} // namespace
} // namespace pmr_bench
