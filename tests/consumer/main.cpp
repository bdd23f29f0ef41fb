// SPDX-License-Identifier: MIT
#include <pmr/pmr.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int result = 1;
    {
        pmr::Connection self(pmr::Target(MPI_COMM_WORLD, rank, 0, 0));
        pmr::SendWindow<int> send(self, 1);
        pmr::RecvWindow<int> recv(self, 1);
        send[0] = 42;
        recv.init();
        send.init();
        send.post();
        recv.post();
        send.wait();
        recv.wait();
        std::printf("pmr %s consumer: received %d over %s\n", PMR_VERSION_STRING, recv[0],
                    std::string(pmr::to_string(self.provider())).c_str());
        result = recv[0] == 42 ? 0 : 1;
    }
    MPI_Finalize();
    return result;
}
