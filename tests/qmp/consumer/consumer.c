/* SPDX-License-Identifier: MIT */
/* A QMP program as USQCD codes write one, built against an installed pmr: with qmp-config, with
 * pkg-config qmp and with find_package(pmr) -> pmr::qmp. Exchanges with both neighbours of a
 * ring and sums; exits non-zero on a wrong value. */
#include <qmp.h>

#include <stdio.h>

int main(int argc, char** argv) {
    QMP_thread_level_t provided;
    if (QMP_init_msg_passing(&argc, &argv, QMP_THREAD_SINGLE, &provided) != QMP_SUCCESS) {
        fprintf(stderr, "QMP_init_msg_passing: %s\n", QMP_get_error_string(NULL));
        return 1;
    }
    const int nodes = QMP_get_number_of_nodes();
    const int node = QMP_get_node_number();
    const int dims[1] = {nodes};
    int bad = QMP_declare_logical_topology(dims, 1) != QMP_SUCCESS;
    double out[2] = {node, node + 0.5};
    double in[2] = {-1, -1};
    QMP_msgmem_t mo = QMP_declare_msgmem(out, sizeof out);
    QMP_msgmem_t mi = QMP_declare_msgmem(in, sizeof in);
    QMP_msghandle_t h[2];
    h[0] = QMP_declare_send_relative(mo, 0, +1, 0);
    h[1] = QMP_declare_receive_relative(mi, 0, -1, 0);
    QMP_msghandle_t both = QMP_declare_multiple(h, 2);
    bad = bad || both == NULL || QMP_start(both) != QMP_SUCCESS || QMP_wait(both) != QMP_SUCCESS;
    const int from = (node + nodes - 1) % nodes;
    bad = bad || in[0] != from || in[1] != from + 0.5;
    double sum = node;
    bad = bad || QMP_sum_double(&sum) != QMP_SUCCESS || sum != nodes * (nodes - 1) / 2.0;
    QMP_free_msghandle(both);
    QMP_free_msgmem(mo);
    QMP_free_msgmem(mi);
    int failures = bad;
    QMP_sum_int(&failures);
    if (node == 0) {
        QMP_printf("consumer %s on %d nodes (QMP %s)\n", failures == 0 ? "ok" : "FAILED", nodes,
                   QMP_version_str());
    }
    QMP_finalize_msg_passing();
    return failures == 0 ? 0 : 1;
}
