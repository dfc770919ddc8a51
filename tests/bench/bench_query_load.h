/*
 * bench_query_load.h - the closed-loop HTTP load generator of bench_query.
 *
 * One thread, one epoll set, N persistent HTTP/1.1 keep-alive connections
 * to 127.0.0.1:port (TCP_NODELAY). Each connection sends a POST to the
 * set's request target with its Content-Type (/query and application/json
 * unless the set says otherwise), reads the whole answer (its
 * Content-Length) and sends the next, so N is the number of requests in
 * flight. The bodies of a set are cycled, connection c starting at body
 * c * n / N. Every request carries "X-Bench-Req: <id_base + i>" for body
 * i, which the canned-answer server uses to answer each request with a
 * body as long as kvindex's answer to it; the other servers ignore the
 * header.
 *
 * A run first warms up (every connection sends requests for a moment and
 * all of them are answered), calls on_timed, then measures for the given
 * seconds: requests started before the end are waited for and counted,
 * and the wall time runs until the last of them is answered. Latency is
 * from the first byte written to the last byte read.
 *
 * A status other than 200 or a connection the server closed is an error;
 * the connection is dialled again and the run goes on. Not thread-safe:
 * one run at a time per thread.
 */
#ifndef KVI_TESTS_BENCH_QUERY_LOAD_H
#define KVI_TESTS_BENCH_QUERY_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The longest request target and Content-Type a set may have. */
#define BQ_TARGET_MAX 256
#define BQ_TYPE_MAX   64

/* A set of request bodies: one query kind in one answer form and one body
 * form. */
typedef struct bq_bodies {
	const char *kind;      /* "trace", "100", "1000" */
	const char *form;      /* "full", "top8" */
	const char *body_form; /* "json", "packed" */
	char **body;
	size_t *len;
	uint32_t *blocks; /* blocks of each prompt */
	size_t n;
	uint32_t id_base;         /* X-Bench-Req of body 0 */
	char *target;             /* request target; NULL: "/query" */
	const char *content_type; /* NULL: "application/json" */
} bq_bodies;

typedef struct bq_load_result {
	size_t done;     /* answered requests, errors included */
	size_t errors;   /* status not 200, or connection closed */
	int first_error; /* its status, -1 for a closed connection; 0: none */
	double seconds;
	double qps;
	double p50_us, p99_us;
} bq_load_result;

/* bq_load_run runs conns connections against port for seconds, as
 * described above, and fills *out. on_timed(arg) (may be NULL) is called
 * between the warm-up and the measurement. Returns KVI_EUNREACHABLE when a
 * connection cannot be made, KVI_EINVAL when b's target or Content-Type
 * is longer than BQ_TARGET_MAX or BQ_TYPE_MAX. */
kvi_err bq_load_run(int port, const bq_bodies *b, int conns, double seconds,
		    void (*on_timed)(void *arg), void *arg,
		    bq_load_result *out);

/* bq_answer_fn receives the answer to body i: its status and body, valid
 * during the call. */
typedef void (*bq_answer_fn)(void *arg, size_t i, int status, const char *body,
			     size_t len);

/* bq_load_each sends the bodies which[0..n) of b once each, in order, over
 * one connection and hands every answer to fn. Returns KVI_EUNREACHABLE,
 * KVI_EINVAL (as bq_load_run) or KVI_EIO (the connection broke). */
kvi_err bq_load_each(int port, const bq_bodies *b, const size_t *which,
		     size_t n, bq_answer_fn fn, void *arg);

/* bq_now_ns returns monotonic nanoseconds. */
uint64_t bq_now_ns(void);

#endif /* KVI_TESTS_BENCH_QUERY_LOAD_H */
