/* SPDX-License-Identifier: MIT */
/* QMP_abort_string ends every node of the job with its message and a non-zero exit code, also
 * while the other nodes wait in a global operation. Run by expect_failure.cmake. */
#include <qmp.h>

#include <stdio.h>

int main(int argc, char** argv) {
    QMP_thread_level_t provided;
    if (QMP_init_msg_passing(&argc, &argv, QMP_THREAD_SINGLE, &provided) != QMP_SUCCESS) {
        return 0; /* not the failure the test expects */
    }
    if (QMP_get_node_number() == QMP_get_number_of_nodes() - 1) {
        char message[] = "the last node gives up";
        QMP_abort_string(3, message);
    }
    QMP_barrier();
    QMP_finalize_msg_passing();
    return 0;
}
