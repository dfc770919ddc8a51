/*
 * bench_query_front.h - the two servers bench_query measures kvindex
 * against, each run as a process of its own (bench_query --serve-...).
 *
 * The HTTP floor answers every POST /query (a JSON or a packed body, and
 * whatever its query string: it reads neither) with a canned JSON body
 * exactly as long as kvindex's answer to the same request: the request's
 * "X-Bench-Req: i" header picks length i of the lengths file (one decimal
 * length a line). It runs on common/httpd, kvindex's own HTTP server, with
 * as many loop threads as the coordinator, so what it costs is the limit
 * of HTTP on the machine for answers of that size.
 *
 * The Redis front is an index served from Redis (bench_query_redis.h):
 * common/httpd again, one hiredis connection per loop thread (opened on
 * the thread's first request), and per query: parse the body with the
 * coordinator's own parser (api_query.h), hash the tokens (local hashes,
 * then the sequence chain from KVI_SEQ_ROOT, as the coordinator does),
 * pipeline one HKEYS per block, count each listener's leading blocks (as
 * hiredis parses the replies, without building reply objects), and answer
 * with the coordinator's own answer writer, top_k honoured: the two
 * indexes pay the same for their JSON. It answers 400 for a bad body and
 * 503 when Redis fails (the next request connects again).
 *
 * Both serve until SIGTERM (bench_query_proc.h: bq_serve).
 */
#ifndef KVI_TESTS_BENCH_QUERY_FRONT_H
#define KVI_TESTS_BENCH_QUERY_FRONT_H

#include <stdint.h>

/* bq_floor_main serves the floor; returns the process's exit code. */
int bq_floor_main(const char *lengths_path, const char *port_file, int threads);

/* bq_front_main serves the Redis front for the listeners of layout_path
 * from the Redis on 127.0.0.1:redis_port; returns the exit code. */
int bq_front_main(const char *layout_path, int redis_port, uint32_t block_size,
		  const char *port_file, int threads);

#endif /* KVI_TESTS_BENCH_QUERY_FRONT_H */
