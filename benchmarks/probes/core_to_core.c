/* SPDX-License-Identifier: MIT */
/* The state of the machine for a benchmark run: two processes, bound to CPUs 0 and 1, take turns to
 * write a cache line each and wait for the other's, 1,000,000 times; prints the time per exchange.
 * On the 2-core VM these benchmarks ran on it was 25-60 ns in some runs and about 250 ns in others
 * (the same binary, minutes apart), and every copy between the cores changed speed with it: run it
 * beside a comparison and compare only runs of the same state.
 *   pmr-probe-core-to-core [exchanges] */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct line {
    _Alignas(64) atomic_long value;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
    const long exchanges = argc > 1 ? atol(argv[1]) : 1000000;
    if (exchanges <= 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "pmr-probe-core-to-core: needs a positive count and two CPUs\n");
        return 2;
    }
    struct line* lines =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (lines == MAP_FAILED) {
        perror("pmr-probe-core-to-core: mmap");
        return 1;
    }
    atomic_init(&lines[0].value, 0);
    atomic_init(&lines[1].value, 0);
    const pid_t child = fork();
    if (child < 0) {
        perror("pmr-probe-core-to-core: fork");
        return 1;
    }
    const int me = child == 0 ? 1 : 0;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(me, &cpus);
    (void)sched_setaffinity(0, sizeof cpus, &cpus);
    const double start = now();
    for (long k = 1; k <= exchanges; ++k) {
        atomic_store_explicit(&lines[me].value, k, memory_order_release);
        while (atomic_load_explicit(&lines[1 - me].value, memory_order_acquire) < k) {
        }
    }
    const double seconds = now() - start;
    if (me == 1) {
        return 0;
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("core-to-core exchange %.1f ns\n", seconds / (double)exchanges * 1e9);
    return 0;
}
