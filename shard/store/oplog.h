/*
 * oplog.h - the codec of log record payloads (see store.h).
 *
 * A payload is what one listener applied during one group commit:
 *
 *     u8 flags (bit 0: has watermark, bit 1: has fingerprint, bit 2:
 *        incomplete; store.h's kvs_mark)
 *     | u64 watermark LE | u64 fingerprint LE | op*
 *     op = 0x01 STORE  ext u64 LE, seq u64 LE, tier u8
 *        | 0x02 REMOVE ext u64 LE, tier u8
 *        | 0x03 CLEAR
 *        | 0x04 GROUP  group u8, kind u8, ratio u32 LE, window u32 LE
 *
 * A tier byte's low 3 bits are the tier, its top 5 the KV cache group of
 * a hybrid model's listener the op is about (0 for a plain listener, so
 * that records from before groups read the same). GROUP says what a
 * group is from there on (index.h's kvx_group_spec); CLEAR empties every
 * group.
 *
 * Replaying the ops in order onto the listener's state as of the previous
 * record gives its state at the watermark. The fingerprint is a hash of the
 * payload of the batch at the watermark: after a restart it tells whether
 * the engine still publishing is the one the state came from (see
 * shard/ingest/ingest.c). The writer side (kvo_rec) is a
 * growable buffer one listener fills between commits; the reader side
 * (kvo_iter) never reads out of bounds and reports malformed payloads as
 * KVI_ECORRUPT.
 */
#ifndef KVI_SHARD_OPLOG_H
#define KVI_SHARD_OPLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "store.h"

#define KVO_HEADER_SIZE 17
#define KVO_GROUP_SHIFT 3
#define KVO_TIER_MASK   7u
#define KVO_GROUPS      32u

typedef enum kvo_kind {
	KVO_STORE = 1,
	KVO_REMOVE = 2,
	KVO_CLEAR = 3,
	KVO_GROUP = 4,
} kvo_kind;

typedef struct kvo_op {
	kvo_kind kind;
	uint8_t tier;
	uint8_t group; /* STORE, REMOVE, GROUP */
	uint64_t ext;
	uint64_t seq; /* STORE only */
	/* GROUP only */
	uint8_t spec_kind;
	uint32_t ratio, window;
} kvo_op;

/* kvo_tier_group packs a tier and a group into one op's tier byte. */
static inline uint8_t
kvo_tier_group(uint8_t tier, uint32_t group)
{
	return (uint8_t)(tier | group << KVO_GROUP_SHIFT);
}

typedef struct kvo_rec {
	uint8_t *buf;
	size_t len, cap;
	uint32_t n_ops;
} kvo_rec;

void kvo_rec_init(kvo_rec *r);
void kvo_rec_fini(kvo_rec *r);
/* kvo_rec_reset empties r for the next commit, keeping its buffer. */
void kvo_rec_reset(kvo_rec *r);
void kvo_rec_store(kvo_rec *r, uint64_t ext, uint64_t seq, uint8_t tier);
void kvo_rec_remove(kvo_rec *r, uint64_t ext, uint8_t tier);
void kvo_rec_clear(kvo_rec *r);
void kvo_rec_group(kvo_rec *r, uint8_t group, uint8_t kind, uint32_t ratio,
		   uint32_t window);
/* kvo_rec_finish writes the header; the payload is r->buf[0..r->len). */
void kvo_rec_finish(kvo_rec *r, const kvs_mark *mark);

typedef struct kvo_iter {
	const uint8_t *p;
	size_t len, off;
} kvo_iter;

/* kvo_iter_init reads the header of a payload. Returns KVI_ECORRUPT when
 * it is too short. */
kvi_err kvo_iter_init(kvo_iter *it, const void *payload, size_t len,
		      kvs_mark *mark);

/* kvo_iter_next reads the next op: KVI_OK, KVI_ENOENT at the end, or
 * KVI_ECORRUPT. */
kvi_err kvo_iter_next(kvo_iter *it, kvo_op *op);

#endif /* KVI_SHARD_OPLOG_H */
