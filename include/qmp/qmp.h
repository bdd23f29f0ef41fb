/* SPDX-License-Identifier: MIT */
/* qmp.h: the QMP 2.5 message-passing API of the USQCD software stack, implemented on pmr.
 *
 * Code written for USQCD's QMP compiles against this header unchanged: the types, constants and
 * function signatures are those of QMP 2.5. The implementation (libqmp, src/qmp/) runs message
 * handles on pmr connections and windows, and the global operations on pmr's persistent
 * collectives. docs/qmp.md lists the calls, their semantics and what differs from USQCD's build.
 *
 * Every function that returns a QMP_status_t reports errors through it (QMP_error_string() turns
 * it into text); functions that return a handle return NULL on an error, and
 * QMP_get_error_number(NULL) / QMP_get_error_string(NULL) tell why. None of them aborts. */
#ifndef PMR_QMP_H
#define PMR_QMP_H

#include <stddef.h>
#include <stdio.h>

#define QMP_VERSION_MAJOR 2
#define QMP_VERSION_MINOR 5
#define QMP_VERSION_SUB 4
#define QMP_VERSION_CODE ((QMP_VERSION_MAJOR << 16) | (QMP_VERSION_MINOR << 8) | QMP_VERSION_SUB)
#define QMP_VERSION_STR "2.5.4"
/* Tells code that cares that this QMP runs on pmr. */
#define QMP_PMR 1

typedef int QMP_bool_t;
#define QMP_TRUE ((QMP_bool_t)1)
#define QMP_FALSE ((QMP_bool_t)0)

typedef enum QMP_status {
    QMP_SUCCESS = 0,
    QMP_ERROR = 0x1001,
    QMP_NOT_INITED,
    QMP_RTENV_ERR,
    QMP_CPUINFO_ERR,
    QMP_NODEINFO_ERR,
    QMP_NOMEM_ERR,
    QMP_MEMSIZE_ERR,
    QMP_HOSTNAME_ERR,
    QMP_INITSVC_ERR,
    QMP_TOPOLOGY_EXISTS,
    QMP_CH_TIMEOUT,
    QMP_NOTSUPPORTED,
    QMP_SVC_BUSY,
    QMP_BAD_MESSAGE,
    QMP_INVALID_ARG,
    QMP_INVALID_TOPOLOGY,
    QMP_NONEIGHBOR_INFO,
    QMP_MEMSIZE_TOOBIG,
    QMP_BAD_MEMORY,
    QMP_NO_PORTS,
    QMP_NODE_OUTRANGE,
    QMP_CHDEF_ERR,
    QMP_MEMUSED_ERR,
    QMP_INVALID_OP,
    QMP_TIMEOUT,
    QMP_MAX_STATUS
} QMP_status_t;
/* The older name of the status type. */
typedef QMP_status_t QMP_status_code_t;

typedef enum QMP_ictype {
    QMP_SWITCH = 0,
    QMP_GRID = 1,
    QMP_MESH = 1,
    QMP_FATTREE = 2
} QMP_ictype_t;

typedef enum QMP_thread_level {
    QMP_THREAD_SINGLE,
    QMP_THREAD_FUNNELED,
    QMP_THREAD_SERIALIZED,
    QMP_THREAD_MULTIPLE
} QMP_thread_level_t;

typedef enum QMP_clear_to_send {
    QMP_CTS_DISABLED = -1,
    QMP_CTS_NOT_READY = 0,
    QMP_CTS_READY = 1
} QMP_clear_to_send_t;

#define QMP_ALIGN_ANY 0
#define QMP_ALIGN_DEFAULT 64

#define QMP_MEM_NONCACHE 0x01
#define QMP_MEM_COMMS 0x02
#define QMP_MEM_FAST 0x04
#define QMP_MEM_DEFAULT (QMP_MEM_COMMS | QMP_MEM_FAST)

/* Fixed-size types some QMP codes use. */
typedef unsigned char QMP_u8_t;
typedef signed char QMP_s8_t;
typedef unsigned short QMP_u16_t;
typedef short QMP_s16_t;
typedef unsigned int QMP_u32_t;
typedef int QMP_s32_t;
typedef unsigned long long QMP_u64_t;
typedef long long QMP_s64_t;
typedef float QMP_float_t;
typedef double QMP_double_t;

typedef struct QMP_mem_struct QMP_mem_t;
typedef struct QMP_msgmem_struct* QMP_msgmem_t;
typedef struct QMP_comm_struct* QMP_comm_t;
typedef struct QMP_msghandle_struct* QMP_msghandle_t;

/* A user reduction: combines `in` into `inout` (inout = inout op in). */
typedef void (*QMP_binary_func)(void* inout, void* in);

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Start and end ------------------------------------------------------------------------ */

/* Initialises MPI (unless the program did) and QMP. Reads and removes QMP's own arguments:
 * -qmp-geom n0 n1 ...     the allocated machine grid (also the default logical topology of
 *                         QMP_layout_grid),
 * -qmp-logic-map a0 a1 ...  the order in which logical axes vary with the node number (a0 fastest),
 * -qmp-alloc-map a0 a1 ...  the same for the allocated grid.
 * `provided` receives the thread level MPI gives. */
QMP_status_t QMP_init_msg_passing(int* argc, char*** argv, QMP_thread_level_t required,
                                  QMP_thread_level_t* provided);
QMP_bool_t QMP_is_initialized(void);
/* Frees every QMP object still alive and finalises MPI if QMP_init_msg_passing started it. */
void QMP_finalize_msg_passing(void);
/* Ends every process of the job with `error_code`. */
void QMP_abort(int error_code);
void QMP_abort_string(int error_code, char* message);

/* ---- Communicators ------------------------------------------------------------------------ */

QMP_comm_t QMP_comm_get_allocated(void);
QMP_status_t QMP_comm_set_allocated(QMP_comm_t comm);
QMP_comm_t QMP_comm_get_job(void);
QMP_status_t QMP_comm_set_job(QMP_comm_t comm);
QMP_comm_t QMP_comm_get_default(void);
QMP_status_t QMP_comm_set_default(QMP_comm_t comm);
/* Collective over `comm`: the nodes of each color form a new communicator, ordered by key. */
QMP_status_t QMP_comm_split(QMP_comm_t comm, int color, int key, QMP_comm_t* newcomm);
QMP_status_t QMP_comm_free(QMP_comm_t comm);
int QMP_comm_get_number_of_colors(QMP_comm_t comm);
int QMP_comm_get_color(QMP_comm_t comm);
int QMP_comm_get_key(QMP_comm_t comm);
/* Stores in *mpicomm a pointer to the MPI_Comm of `comm` (an MPI_Comm*), valid until the
 * communicator is freed. */
QMP_status_t QMP_get_mpi_comm(QMP_comm_t comm, void** mpicomm);

/* ---- The machine -------------------------------------------------------------------------- */

QMP_ictype_t QMP_get_msg_passing_type(void);
int QMP_get_number_of_nodes(void);
int QMP_comm_get_number_of_nodes(QMP_comm_t comm);
int QMP_get_node_number(void);
int QMP_comm_get_node_number(QMP_comm_t comm);
int QMP_get_number_of_jobs(void);
int QMP_get_job_number(void);
int QMP_get_number_of_job_geometry_dimensions(void);
const int* QMP_get_job_geometry(void);
QMP_bool_t QMP_is_primary_node(void);
QMP_bool_t QMP_comm_is_primary_node(QMP_comm_t comm);
int QMP_get_allocated_number_of_dimensions(void);
const int* QMP_get_allocated_dimensions(void);
const int* QMP_get_allocated_coordinates(void);
int QMP_get_SMP_count(void);
int QMP_io_node(int node);
int QMP_master_io_node(void);

/* ---- Logical topology --------------------------------------------------------------------- */

QMP_status_t QMP_declare_logical_topology(const int dims[], int ndim);
QMP_status_t QMP_comm_declare_logical_topology(QMP_comm_t comm, const int dims[], int ndim);
QMP_status_t QMP_declare_logical_topology_map(const int dims[], int ndim, const int map[],
                                              int mapdim);
QMP_status_t QMP_comm_declare_logical_topology_map(QMP_comm_t comm, const int dims[], int ndim,
                                                   const int map[], int mapdim);
QMP_bool_t QMP_logical_topology_is_declared(void);
QMP_bool_t QMP_comm_logical_topology_is_declared(QMP_comm_t comm);
int QMP_get_logical_number_of_dimensions(void);
int QMP_comm_get_logical_number_of_dimensions(QMP_comm_t comm);
const int* QMP_get_logical_dimensions(void);
const int* QMP_comm_get_logical_dimensions(QMP_comm_t comm);
const int* QMP_get_logical_coordinates(void);
const int* QMP_comm_get_logical_coordinates(QMP_comm_t comm);
/* The coordinates of `node` in memory from malloc(): the caller frees them. */
int* QMP_get_logical_coordinates_from(int node);
int* QMP_comm_get_logical_coordinates_from(QMP_comm_t comm, int node);
void QMP_get_logical_coordinates_from2(int coords[], int node);
void QMP_comm_get_logical_coordinates_from2(QMP_comm_t comm, int coords[], int node);
int QMP_get_node_number_from(const int coordinates[]);
int QMP_comm_get_node_number_from(QMP_comm_t comm, const int coordinates[]);

/* ---- The lattice -------------------------------------------------------------------------- */

/* Declares a logical topology for a lattice of `dimensions` unless one exists, and the subgrid of
 * every node. */
QMP_status_t QMP_layout_grid(const int dimensions[], int ndims);
QMP_status_t QMP_comm_layout_grid(QMP_comm_t comm, const int dimensions[], int ndims);
int QMP_get_number_of_subgrid_dimensions(void);
const int* QMP_get_subgrid_dimensions(void);
int QMP_get_number_of_subgrid_sites(void);

/* ---- Memory ------------------------------------------------------------------------------- */

QMP_mem_t* QMP_allocate_memory(size_t nbytes);
QMP_mem_t* QMP_allocate_aligned_memory(size_t nbytes, size_t alignment, int flags);
void* QMP_get_memory_pointer(QMP_mem_t* mem);
void QMP_free_memory(QMP_mem_t* mem);

QMP_msgmem_t QMP_declare_msgmem(const void* mem, size_t nbytes);
QMP_msgmem_t QMP_declare_strided_msgmem(void* base, size_t blksize, int nblocks, ptrdiff_t stride);
QMP_msgmem_t QMP_declare_strided_array_msgmem(void* base[], size_t blksize[], int nblocks[],
                                              ptrdiff_t stride[], int num);
QMP_msgmem_t QMP_declare_indexed_msgmem(void* base, int blocklen[], int index[], int elemsize,
                                        int count);
void QMP_free_msgmem(QMP_msgmem_t m);

/* ---- Message handles ---------------------------------------------------------------------- */

QMP_msghandle_t QMP_declare_receive_relative(QMP_msgmem_t m, int axis, int dir, int priority);
QMP_msghandle_t QMP_comm_declare_receive_relative(QMP_comm_t comm, QMP_msgmem_t m, int axis,
                                                  int dir, int priority);
QMP_msghandle_t QMP_declare_send_relative(QMP_msgmem_t m, int axis, int dir, int priority);
QMP_msghandle_t QMP_comm_declare_send_relative(QMP_comm_t comm, QMP_msgmem_t m, int axis, int dir,
                                               int priority);
QMP_msghandle_t QMP_declare_send_to(QMP_msgmem_t m, int rem_node_rank, int priority);
QMP_msghandle_t QMP_comm_declare_send_to(QMP_comm_t comm, QMP_msgmem_t m, int rem_node_rank,
                                         int priority);
QMP_msghandle_t QMP_declare_receive_from(QMP_msgmem_t m, int rem_node_rank, int priority);
QMP_msghandle_t QMP_comm_declare_receive_from(QMP_comm_t comm, QMP_msgmem_t m, int rem_node_rank,
                                              int priority);
QMP_status_t QMP_change_address(QMP_msghandle_t msg, void* addr);
QMP_status_t QMP_change_address_multiple(QMP_msghandle_t msg, void* addr[], int naddr);
/* Frees a handle; a multiple handle frees the handles it holds. A handle held by a multiple one
 * cannot be freed on its own. */
void QMP_free_msghandle(QMP_msghandle_t h);
/* A handle that starts and waits all of msgh[0..num): it takes them over (a multiple handle among
 * them is taken apart and freed). */
QMP_msghandle_t QMP_declare_multiple(QMP_msghandle_t msgh[], int num);
QMP_msghandle_t QMP_declare_send_recv_pairs(QMP_msghandle_t msgh[], int num);

QMP_status_t QMP_clear_to_send(QMP_msghandle_t mh, QMP_clear_to_send_t cts);
QMP_status_t QMP_start(QMP_msghandle_t h);
QMP_status_t QMP_wait(QMP_msghandle_t h);
QMP_status_t QMP_wait_all(QMP_msghandle_t h[], int num);
QMP_bool_t QMP_is_complete(QMP_msghandle_t h);

/* ---- Global operations -------------------------------------------------------------------- */

QMP_status_t QMP_barrier(void);
QMP_status_t QMP_comm_barrier(QMP_comm_t comm);
/* From the primary node (node 0) to every node. */
QMP_status_t QMP_broadcast(void* buffer, size_t nbytes);
QMP_status_t QMP_comm_broadcast(QMP_comm_t comm, void* buffer, size_t nbytes);
QMP_status_t QMP_sum_int(int* value);
QMP_status_t QMP_comm_sum_int(QMP_comm_t comm, int* value);
QMP_status_t QMP_sum_float(float* value);
QMP_status_t QMP_comm_sum_float(QMP_comm_t comm, float* value);
QMP_status_t QMP_sum_double(double* value);
QMP_status_t QMP_comm_sum_double(QMP_comm_t comm, double* value);
QMP_status_t QMP_sum_long_double(long double* value);
QMP_status_t QMP_comm_sum_long_double(QMP_comm_t comm, long double* value);
QMP_status_t QMP_sum_double_extended(double* value);
QMP_status_t QMP_comm_sum_double_extended(QMP_comm_t comm, double* value);
QMP_status_t QMP_sum_float_array(float value[], int length);
QMP_status_t QMP_comm_sum_float_array(QMP_comm_t comm, float value[], int length);
QMP_status_t QMP_sum_double_array(double value[], int length);
QMP_status_t QMP_comm_sum_double_array(QMP_comm_t comm, double value[], int length);
QMP_status_t QMP_sum_long_double_array(long double value[], int length);
QMP_status_t QMP_comm_sum_long_double_array(QMP_comm_t comm, long double value[], int length);
QMP_status_t QMP_max_float(float* value);
QMP_status_t QMP_comm_max_float(QMP_comm_t comm, float* value);
QMP_status_t QMP_max_double(double* value);
QMP_status_t QMP_comm_max_double(QMP_comm_t comm, double* value);
QMP_status_t QMP_min_float(float* value);
QMP_status_t QMP_comm_min_float(QMP_comm_t comm, float* value);
QMP_status_t QMP_min_double(double* value);
QMP_status_t QMP_comm_min_double(QMP_comm_t comm, double* value);
QMP_status_t QMP_xor_ulong(unsigned long* value);
QMP_status_t QMP_comm_xor_ulong(QMP_comm_t comm, unsigned long* value);
QMP_status_t QMP_binary_reduction(void* lbuffer, size_t buflen, QMP_binary_func bfunc);
QMP_status_t QMP_comm_binary_reduction(QMP_comm_t comm, void* lbuffer, size_t buflen,
                                       QMP_binary_func bfunc);

/* ---- Errors and output -------------------------------------------------------------------- */

const char* QMP_error_string(QMP_status_t code);
/* The error of the last failed call on `mh`, or (mh NULL) of the last failed call of any kind. */
QMP_status_t QMP_get_error_number(QMP_msghandle_t mh);
/* Its text, with what went wrong where pmr said so. */
const char* QMP_get_error_string(QMP_msghandle_t mh);

int QMP_verbose(int level);
int QMP_profcontrol(int level);
/* printf with the prefix "QMP m<node>,n<nodes>@<host>: ". */
int QMP_printf(const char* format, ...);
int QMP_fprintf(FILE* stream, const char* format, ...);
int QMP_info(const char* format, ...);
int QMP_error(const char* format, ...);

/* Wall-clock seconds. */
double QMP_time(void);
void QMP_reset_total_qmp_time(void);
double QMP_get_total_qmp_time(void);

const char* QMP_version_str(void);
int QMP_version_int(void);

#ifdef __cplusplus
}
#endif

#endif /* PMR_QMP_H */
