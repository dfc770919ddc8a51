/*
 * bench_stream.h - the event streams benchmarks replay, built from a
 * Mooncake trace.
 *
 * Each trace request goes to one listener (round robin). Every listener
 * has a FIFO prefix cache of cache_blocks blocks: a request's leading
 * blocks already cached are hits, the rest are stored in one BlockStored
 * whose parent is the last hit, and what the cache drops to make room is
 * removed in one BlockRemoved before it. A trace hash id stands for
 * blocks_per_id blocks of block_size tokens; copies replays the trace with
 * disjoint ids. Block hashes chain like an engine's: equal prefixes have
 * equal hashes on every listener. Every batch is encoded once, up front,
 * in the chosen wire form, with its listener's next seq; the stream is the
 * batches in the order the trace issued them.
 */
#ifndef KVI_TESTS_BENCH_STREAM_H
#define KVI_TESTS_BENCH_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "wire_encode.h"

typedef struct bs_opts {
	const char *trace;
	uint32_t block_size;
	uint32_t blocks_per_id;
	size_t cache_blocks; /* per listener */
	uint32_t listeners;
	uint32_t copies;   /* passes over the trace, disjoint ids */
	size_t max_events; /* stop after this many block events; 0: all */
	kvi_event_form form;
} bs_opts;

typedef struct bs_batch {
	uint32_t listener;
	uint64_t seq;
	size_t off, len;          /* into bs_stream.data */
	uint32_t stored, removed; /* its block events: hashes of each */
} bs_batch;

typedef struct bs_stream {
	uint8_t *data;
	size_t bytes, data_cap;
	bs_batch *batches;
	size_t n, cap;
	size_t block_events; /* hashes in stored and removed events */
	size_t stored, removed;
	size_t requests;
} bs_stream;

/* bs_build builds the stream o describes; exits the program when the trace
 * cannot be read. */
void bs_build(const bs_opts *o, bs_stream *out);
void bs_free(bs_stream *s);

/* bs_mix is the 64-bit mixer the streams use (never returns 0). */
uint64_t bs_mix(uint64_t x);

/* bs_now returns monotonic seconds. */
double bs_now(void);

/* bs_now_ns returns monotonic nanoseconds. */
uint64_t bs_now_ns(void);

/* bs_cmp_u64 orders uint64_t values for qsort (latency samples). */
int bs_cmp_u64(const void *a, const void *b);

/* bs_rss_bytes returns the process's resident set size. */
size_t bs_rss_bytes(void);

#endif /* KVI_TESTS_BENCH_STREAM_H */
