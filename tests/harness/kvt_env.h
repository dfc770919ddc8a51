/*
 * kvt_env.h - the environment of an integration test: temporary
 * directories, deadlines, polling and ports.
 *
 * Temporary directories are made under $TMPDIR (or /tmp) and removed
 * recursively by kvt_tmpdir_remove, or at exit for those still present,
 * unless KVI_TEST_KEEP=1, in which case their paths are printed instead so
 * that logs can be read after a failure. Waits poll with a deadline and
 * never block longer than asked.
 *
 * Thread-safe except kvt_tmpdir_* which a test calls from its main thread.
 */
#ifndef KVI_TESTS_KVT_ENV_H
#define KVI_TESTS_KVT_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* kvt_tmpdir_make creates a new directory named prefix-XXXXXX and returns
 * its path in *out (kvi_free). Returns KVI_EIO. */
kvi_err kvt_tmpdir_make(const char *prefix, char **out);

/* kvt_tmpdir_remove removes path and everything under it (kept with
 * KVI_TEST_KEEP=1). */
void kvt_tmpdir_remove(const char *path);

/* kvt_path returns dir/name in a new string (kvi_free). */
char *kvt_path(const char *dir, const char *name);

/* kvt_file_read returns the contents of path, NUL-terminated, in a new
 * buffer (kvi_free) and its length in *len (may be NULL); NULL if it cannot
 * be read. */
char *kvt_file_read(const char *path, size_t *len);

/* kvt_log_tail prints the last max bytes of the log at path to stderr,
 * headed by what: the cause of a process's bad exit, in the test's own
 * output. */
void kvt_log_tail(const char *what, const char *path, size_t max);

/* kvt_why writes a check's reason for failing into why (len bytes) and
 * returns false, for `return kvt_why(why, len, "...", ...);`. */
bool kvt_why(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int64_t kvt_now_ms(void);
void kvt_sleep_ms(int ms);

/* kvt_wait_until polls pred(arg) every few milliseconds until it returns
 * true (then true) or timeout_ms passed (then false). */
bool kvt_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms);

/* kvt_wait_file waits until path exists. */
bool kvt_wait_file(const char *path, int timeout_ms);

/* Ports. A server a test starts binds port 0 and says in its log which
 * port it got (kvt_log_port): nothing can take the port between a pick
 * and a bind. A server that must come back on the same address after a
 * restart (a shard the coordinator is told, the API server a coordinator
 * watches) binds a loopback address of its own (kvt_loopback_pick), where
 * no other process binds while it is down: other tests' servers and
 * simulators bind 127.0.0.1, and outgoing connections to any 127.x.y.z
 * leave from 127.0.0.1 (only a wildcard bind of the same port could take
 * it). On 127.0.0.1 the port is anyone's while the server is down:
 * another test's server or simulator, or the local end of an outgoing
 * connection, which holds it through TIME_WAIT whatever SO_REUSEADDR
 * says. */

#define KVT_HOST_MAX 16 /* an IPv4 address and its NUL */

/* kvt_loopback_pick writes into host (len >= KVT_HOST_MAX) an address of
 * the loopback network 127.0.0.0/8 drawn at random outside 127.0.x.y
 * (where 127.0.0.1 and the addresses tests name for "nothing listens here"
 * are), which binds; 127.0.0.1 when none does (a loopback device with only
 * that address). */
void kvt_loopback_pick(char *host, size_t len);

/* kvt_port_refusing binds a TCP socket to a port of 127.0.0.1 the kernel
 * picks, without SO_REUSEADDR and without listening: connections to it
 * are refused, and no other socket can bind the port while the returned
 * descriptor is open (close it when done). Writes the port into *port;
 * returns -1 if no socket could be bound. */
int kvt_port_refusing(int *port);

/* kvt_addr_pick writes into host (len >= KVT_HOST_MAX) a loopback address
 * of the caller's own (kvt_loopback_pick) and into *port a port free
 * there, for a server that cannot say which port it bound (a benchmark's
 * processes, whose logs say it only at a level that would log inside what
 * is measured). No other process binds that address, so the port stays
 * free until the server binds it. Returns KVI_EIO if no socket binds
 * there. */
kvi_err kvt_addr_pick(char *host, size_t len, int *port);

/* kvt_ports_pick finds n consecutive TCP ports that all bind on 127.0.0.1,
 * trying random bases from 20000 up to the kernel's ephemeral ports
 * (ip_local_port_range), and writes the first into *base. The ports are
 * released again: another process may take one before the caller's
 * server binds it. Only for what bench_query measures and compares
 * across builds (redis-server, and a coordinator whose log at its
 * benchmark level does not say its port, both dialed on 127.0.0.1 by
 * the load generator). Returns KVI_EEXIST if no range was found. */
kvi_err kvt_ports_pick(int n, int *base);

#endif /* KVI_TESTS_KVT_ENV_H */
