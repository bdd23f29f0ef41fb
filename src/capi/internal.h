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

/** Runs `body(context)` the way every C function runs its body: PMR_SUCCESS if it returns, else
 *  the code and last error that the exception it threw maps to. `body` is C++ that may throw. For
 *  the test of that mapping (tests/capi/test_capi_cxx.cpp): some codes, PMR_ERR_OTHER above all,
 *  no correct call can provoke on purpose. */
int pmr_capi_run_guarded(const char* function, void (*body)(void*), void* context);

#ifdef __cplusplus
}
#endif

#endif
