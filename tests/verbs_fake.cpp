// SPDX-License-Identifier: MIT
// verbs_fake.hpp's helpers, and the libibverbs functions both fake devices answer alike.
#include "verbs_fake.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace verbs_fake {

int read_request(const ibv_send_wr& wr, Operation& op) {
    op.request = wr;
    op.request.next = nullptr;
    op.signalled = (wr.send_flags & IBV_SEND_SIGNALED) != 0;
    std::size_t total = 0;
    for (int i = 0; i < wr.num_sge; ++i) {
        op.gather.push_back(wr.sg_list[i]);
        total += wr.sg_list[i].length;
    }
    if ((wr.send_flags & IBV_SEND_INLINE) != 0) {
        if (total > max_inline) {
            return EINVAL;
        }
        for (const ibv_sge& sge : op.gather) {
            // NOLINTNEXTLINE(performance-no-int-to-ptr): verbs carry addresses as integers
            const auto* p = reinterpret_cast<const std::byte*>(sge.addr);
            op.inline_data.insert(op.inline_data.end(), p, p + sge.length);
        }
    }
    return 0;
}

bool transition_complete(ibv_qp_state state, int mask) {
    int needed = 0;
    switch (state) {
    case IBV_QPS_INIT:
        needed = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        break;
    case IBV_QPS_RTR:
        needed = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        break;
    case IBV_QPS_RTS:
        needed = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                 IBV_QP_MAX_QP_RD_ATOMIC;
        break;
    default:
        return false;
    }
    return (mask & IBV_QP_STATE) != 0 && (mask & needed) == needed;
}

bool access_supported(std::size_t bytes, int access) {
    return bytes != 0 && (access & IBV_ACCESS_REMOTE_WRITE) != 0 &&
           (access & IBV_ACCESS_LOCAL_WRITE) != 0;
}

ibv_device** device_list(ibv_device& device, const char* name, int* count) {
    std::strcpy(device.name, name);
    // An array of two device pointers (the list ends with a null one), freed by free().
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
    list[0] = &device;
    if (count != nullptr) {
        *count = 1;
    }
    return list;
}

} // namespace verbs_fake

extern "C" {

void ibv_free_device_list(ibv_device** list) {
    std::free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
    return device->name;
}

int ibv_close_device(ibv_context* /*context*/) {
    return 0;
}

int ibv_query_device(ibv_context* /*context*/, ibv_device_attr* attr) {
    *attr = ibv_device_attr{};
    attr->phys_port_cnt = verbs_fake::ports;
    attr->max_cqe = verbs_fake::max_cqe;
    attr->max_qp_wr = 1024;
    return 0;
}

int(ibv_query_port)(ibv_context* /*context*/, std::uint8_t port, _compat_ibv_port_attr* compat) {
    if (port < 1 || port > verbs_fake::ports) {
        return EINVAL;
    }
    auto* attr = reinterpret_cast<ibv_port_attr*>(compat);
    attr->state = IBV_PORT_ACTIVE;
    attr->active_mtu = IBV_MTU_4096;
    attr->lid = verbs_fake::lid_of(port);
    attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
    attr->gid_tbl_len = 1;
    return 0;
}

int ibv_query_gid(ibv_context* /*context*/, std::uint8_t port, int /*index*/, ibv_gid* gid) {
    std::memset(gid, 0, sizeof *gid);
    gid->raw[0] = 0xfe;
    gid->raw[15] = port;
    return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* context) {
    auto* pd = new ibv_pd{};
    pd->context = context;
    return pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
    delete pd;
    return 0;
}

} // extern "C"
