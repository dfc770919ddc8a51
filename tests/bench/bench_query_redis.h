/*
 * bench_query_redis.h - the Redis-backed index bench_query compares
 * kvindex with, laid out the way llm-d's KV cache manager uses Redis.
 *
 * One Redis hash per block, keyed "<model>@<seq_hash>" (the sequence hash
 * of common/hash.h, in decimal), with one field per listener and tier
 * holding the block, "<instance_id>#<dp_rank>@<tier>" (the instance id the
 * coordinator gives a pod of the discovery file; tier "gpu" or "cpu"), its
 * value empty: llm-d's "pod@tier" fields. Ingest is pipelined HSETs; a
 * query pipelines one HKEYS per block of the prompt and each listener's
 * match is the number of leading blocks it holds (bench_query_front.h).
 *
 * The listeners ("holders") come from the simulator's layout file, in
 * its order: holder pod * dp + rank is the simulator's rank of the same
 * index. The contents come from the simulator's ground truth (GET /truth of
 * every rank), so Redis holds exactly the blocks kvindex indexes.
 *
 * redis-server runs on 127.0.0.1 on a free port with its own directory,
 * no RDB snapshots, and AOF off or on (appendfsync everysec). Nothing here
 * is thread-safe except bq_holders_find on a loaded table.
 */
#ifndef KVI_TESTS_BENCH_QUERY_REDIS_H
#define KVI_TESTS_BENCH_QUERY_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "kvitest.h"

#define BQ_TIER_GPU 1u
#define BQ_TIER_CPU 2u

typedef struct bq_holder {
	uint64_t instance_id;
	uint16_t rank;
	char *pod;
	char field[32]; /* "<instance_id>#<rank>", before "@<tier>" */
	size_t field_len;
} bq_holder;

typedef struct bq_holders {
	bq_holder *h;
	size_t n;
	uint32_t *table; /* open addressing by field: index + 1, 0 empty */
	size_t mask;
} bq_holders;

/* bq_holders_load reads the pods of a layout (discovery) file. Returns
 * KVI_ENOENT when it cannot be read, KVI_EPROTO when it is not one. */
kvi_err bq_holders_load(const char *layout_path, bq_holders *out);
void bq_holders_fini(bq_holders *hs);

/* bq_holders_find returns the index of the holder s[0..len) names
 * ("<instance_id>#<rank>", without the tier), or -1. */
long bq_holders_find(const bq_holders *hs, const char *s, size_t len);

/* bq_u64_text writes v in decimal into buf (not NUL-terminated) and
 * returns its length. */
size_t bq_u64_text(char buf[24], uint64_t v);

/* bq_block_key writes the key of the block with sequence hash seq_hash of
 * model[0..model_len) into buf (cap bytes, NUL-terminated) and returns its
 * length; 0 when it does not fit. */
size_t bq_block_key(char *buf, size_t cap, const char *model, size_t model_len,
		    uint64_t seq_hash);

/* One (block, listener) entry of the ground truth. */
typedef struct bq_entry {
	uint64_t seq_hash;
	uint32_t holder;
	uint8_t tiers; /* BQ_TIER_* */
} bq_entry;

typedef struct bq_truth {
	bq_entry *e;
	size_t n, cap;
} bq_truth;

/* bq_truth_read reads every rank's blocks from the simulator. Returns
 * the errors of kvt_sim_call, or KVI_EPROTO for an answer it cannot
 * read. */
kvi_err bq_truth_read(const kvt_sim *sim, bq_truth *out);
void bq_truth_fini(bq_truth *t);

typedef struct bq_redis {
	kvt_proc *proc;
	int port;
	bool aof;
} bq_redis;

/* bq_redis_start runs bin (redis-server) with its data in dir/redis-aof
 * or dir/redis and its log next to it, and waits until it answers PING.
 * Returns KVI_EIO or KVI_ETIMEDOUT; *r is then stopped. */
kvi_err bq_redis_start(const char *bin, const char *dir, bool aof, bq_redis *r);
void bq_redis_stop(bq_redis *r);

/* bq_redis_ingest writes every entry of t with pipelined HSETs and
 * returns the wall time it took in *seconds. Returns KVI_EIO when Redis
 * cannot be reached or answers an error. */
kvi_err bq_redis_ingest(const bq_redis *r, const bq_truth *t,
			const bq_holders *hs, const char *model,
			double *seconds);

#endif /* KVI_TESTS_BENCH_QUERY_REDIS_H */
