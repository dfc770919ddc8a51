/*
 * bench_query_proc.h - processes of bench_query: the CPU time a server
 * process used, finding a program on PATH, the port file a server that
 * bench_query runs writes once it listens, and running such a server until
 * it is told to stop.
 *
 * The anchors (the canned-answer server and the Redis front) are this
 * same program run again with a --serve-* flag, each a process of its
 * own, so that its CPU time can be read from /proc/PID/stat like that of
 * kvindex's processes and redis-server.
 */
#ifndef KVI_TESTS_BENCH_QUERY_PROC_H
#define KVI_TESTS_BENCH_QUERY_PROC_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "httpd.h"

/* bq_cpu_ns returns the user plus system CPU time of process pid (all its
 * threads) in nanoseconds, or 0 when it cannot be read. */
uint64_t bq_cpu_ns(pid_t pid);

/* bq_which returns the path of program name on PATH in a new string
 * (kvi_free), or NULL. */
char *bq_which(const char *name);

/* bq_port_file_wait waits up to timeout_ms for path (written by
 * bq_serve) and returns the port it names, or -1. */
int bq_port_file_wait(const char *path, int timeout_ms);

/* bq_serve starts h on 127.0.0.1 with threads loop threads on a free
 * port, writes the port to port_file (atomically), and serves until
 * SIGTERM or SIGINT; then it stops and frees h. Returns the process's exit
 * code: 0, or 1 when h could not start. */
int bq_serve(kvi_httpd *h, int threads, const char *port_file);

#endif /* KVI_TESTS_BENCH_QUERY_PROC_H */
