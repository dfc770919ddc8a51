/*
 * kvt_proc.h - child processes for integration tests.
 *
 * A test starts the real binaries with kvt_proc_start: fork + exec, the
 * child in its own process group, its standard output and error appended
 * to a log file, and PR_SET_PDEATHSIG so that it dies with the test even
 * when the test is killed with SIGKILL (a ctest timeout). Every child is
 * recorded in a process-wide registry; kvt_proc_kill_all, run at exit and
 * from fatal-signal handlers, SIGKILLs the group of every child still
 * running, so a failing or aborted test leaks no process.
 *
 * Stopping is SIGTERM to the group, then SIGKILL after a timeout. Exit
 * statuses are the exit code, or 128 + signal number for a signal.
 *
 * A kvt_proc is used by one thread; the registry is thread-safe.
 */
#ifndef KVI_TESTS_KVT_PROC_H
#define KVI_TESTS_KVT_PROC_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

typedef struct kvt_proc kvt_proc;

/* kvt_proc_start runs argv[0] (a path) with the NULL-terminated argv,
 * output appended to log_path (NULL: inherited). Returns KVI_EIO if the
 * log cannot be opened or fork fails; an exec failure shows up as exit
 * status 127. */
kvi_err kvt_proc_start(const char *const *argv, const char *log_path,
		       kvt_proc **out);

pid_t kvt_proc_pid(const kvt_proc *p);

/* kvt_proc_alive returns whether the child is still running (reaping it if
 * it has exited). */
bool kvt_proc_alive(kvt_proc *p);

/* kvt_proc_wait waits up to timeout_ms for the child to exit and writes its
 * status into *status. Returns KVI_ETIMEDOUT if it is still running. */
kvi_err kvt_proc_wait(kvt_proc *p, int timeout_ms, int *status);

/* kvt_proc_stop sends SIGTERM to the child's group, waits up to timeout_ms,
 * then SIGKILLs it; *status (may be NULL) gets the exit status. Returns
 * KVI_ETIMEDOUT when SIGKILL was needed. */
kvi_err kvt_proc_stop(kvt_proc *p, int timeout_ms, int *status);

/* kvt_proc_kill SIGKILLs the child's group and reaps the child. */
void kvt_proc_kill(kvt_proc *p);

/* kvt_proc_free kills the child if it still runs and frees p (NULL ok). */
void kvt_proc_free(kvt_proc *p);

/* kvt_proc_kill_all SIGKILLs every child still running; async-signal-safe
 * (it only calls kill). */
void kvt_proc_kill_all(void);

/* kvt_pid_rss_kib returns the resident set of process pid in KiB (VmRSS),
 * -1 when it cannot be read. */
long kvt_pid_rss_kib(pid_t pid);

/* kvt_pid_anon_kib returns the part of it that is anonymous memory
 * (RssAnon: the heap, not mapped files such as an LMDB store). */
long kvt_pid_anon_kib(pid_t pid);

/* kvt_pid_fds returns how many descriptors process pid has open (counted
 * in /proc/pid/fd; for the caller itself, the directory's own is among
 * them), -1 when it cannot be read. */
long kvt_pid_fds(pid_t pid);

/* kvt_file_size returns the size of the file at path, 0 when absent: where
 * a child's lines will start in a log it appends to. */
long kvt_file_size(const char *path);

/* kvt_log_field waits up to timeout_ms for the log at path to hold, past
 * byte from, a line of event (event=NAME) with field key (key=VALUE), and
 * copies VALUE into out. This is how a test learns what a child chose for
 * itself, such as the port it bound when given port 0. Returns
 * KVI_ECLOSED when p (may be NULL) exits first, KVI_ETIMEDOUT when no
 * such line comes. */
kvi_err kvt_log_field(const char *path, long from, const char *event,
		      const char *key, char *out, size_t len, kvt_proc *p,
		      int timeout_ms);

/* kvt_log_port is kvt_log_field for a port a child bound (given port 0):
 * writes the value into *port. Returns as kvt_log_field, and KVI_EPROTO
 * when the value is not a port. */
kvi_err kvt_log_port(const char *path, long from, const char *event,
		     const char *key, kvt_proc *p, int timeout_ms, int *port);

#endif /* KVI_TESTS_KVT_PROC_H */
