/*
 * sim_os.h - operating-system helpers of the simulator.
 *
 * A monotonic clock, binding a range of consecutive ports (one socket per
 * rank) with an automatic choice of the range, and an atomic file write
 * (temporary file + rename) for the layout file that tests poll for.
 * All functions are thread-safe.
 */
#ifndef KVI_SIM_OS_H
#define KVI_SIM_OS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* sim_now_ns returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t sim_now_ns(void);

/* Binds item i (0 <= i < n) on port; returns KVI_OK, KVI_EEXIST when the
 * port is taken, or another error that stops the search. */
typedef kvi_err (*sim_bind_fn)(void *arg, size_t i, int port);
/* Undoes a successful bind of item i. */
typedef void (*sim_unbind_fn)(void *arg, size_t i);

/* sim_bind_range binds items 0..n-1 on ports base+0..base+n-1. With base 0
 * it tries random bases in [20000, 60000 - n) until every port binds (up to
 * 200 attempts), undoing partial attempts. Writes the base used into *out.
 * Returns KVI_EEXIST when a fixed range is taken or no free range was found,
 * KVI_ERANGE when the range passes port 65535, or bind's own error. */
kvi_err sim_bind_range(size_t n, int base, sim_bind_fn bind,
		       sim_unbind_fn unbind, void *arg, int *out);

/* sim_write_file_atomic writes len bytes to path through path.tmp and a
 * rename, so readers see the whole file or none. Returns KVI_EIO. */
kvi_err sim_write_file_atomic(const char *path, const char *data, size_t len);

#endif /* KVI_SIM_OS_H */
