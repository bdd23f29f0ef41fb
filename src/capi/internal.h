/* SPDX-License-Identifier: MIT */
/* Internal to pmr's language bindings (not installed): lets the Fortran layer report errors that
 * it detects itself (a non-contiguous array, MPI not initialised) through pmr_last_error(). */
#ifndef PMR_CAPI_INTERNAL_H
#define PMR_CAPI_INTERNAL_H

#ifdef __cplusplus
extern "C" {
#endif

/** Records `message` as the calling thread's last error and returns `code`. */
int pmr_capi_record_error(int code, const char* message);

#ifdef __cplusplus
}
#endif

#endif
