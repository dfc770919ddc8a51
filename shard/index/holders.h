/*
 * holders.h - a partition's map from sequence hash to the listeners that
 * hold it, and on which tiers.
 *
 * The map is split into KVX_STRIPES stripes by the top bits of the
 * sequence hash (sequence hashes are XXH3 outputs, so the bits are
 * uniform). Stripes are independent: each has its own hash table and its
 * own pool of holder lists, so growing one stalls little, and a bulk load
 * can build different stripes on different threads, each stripe small
 * enough to stay in cache while it is built.
 *
 * A table value is a holder word: one holder inline, (listener id << 3 |
 * tiers), or, with the top bit set, the offset of a holder list in the
 * stripe's pool, kept sorted by listener id.
 *
 * The pool is one array of 32-bit words per stripe. A list is its length
 * and then its holder words, in a block whose size depends only on the
 * length: 3, 4, 6, 8, 12, 16... words, each size half again or a third
 * more than the last. A list that outgrows its block (or shrinks into a
 * smaller size) moves, and the block it leaves goes on a free list of its
 * size, for the next list of that size. Most lists have two holders: 12
 * bytes in the pool, where a list of its own from malloc cost 40 with the
 * pointer to it.
 *
 * Not thread-safe: the index serialises writers and readers of a
 * partition; during a bulk load each stripe has one thread.
 */
#ifndef KVI_SHARD_HOLDERS_H
#define KVI_SHARD_HOLDERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "table.h"

#define KVX_STRIPES            (1u << KVX_STRIPE_BITS)
#define KVX_LIST_FLAG          0x80000000u
#define KVX_HOLDER(lid, tiers) ((uint32_t)(lid) << 3 | (uint32_t)(tiers))
#define KVX_HOLDER_LID(h)      ((h) >> 3)
#define KVX_HOLDER_TIERS(h)    ((uint8_t)((h)&7u))

/* Block sizes: two per power of two, up to the largest list a pool can
 * hold (2^31 words: a holder word's offset has 31 bits). */
#define KVX_POOL_SIZES 64

typedef struct kvx_stripe {
	kvx_seqmap map;
	uint32_t *pool;   /* holder lists; word 0 is never a list */
	size_t pool_used; /* words handed out, from the start */
	size_t pool_cap;  /* words allocated */
	uint32_t free_head[KVX_POOL_SIZES]; /* a free block of each size, or 0;
					     * its first word is the next */
	_Atomic uint64_t seqs; /* distinct sequence hashes; any thread reads */
} kvx_stripe;

typedef struct kvx_holdmap {
	kvx_stripe stripes[KVX_STRIPES];
} kvx_holdmap;

void kvx_hold_init(kvx_holdmap *h);
void kvx_hold_fini(kvx_holdmap *h);

static inline kvx_stripe *
kvx_hold_stripe(kvx_holdmap *h, uint64_t seq)
{
	return &h->stripes[seq >> (64 - KVX_STRIPE_BITS)];
}

/* kvx_hold_get returns the holder words of seq (count in *n): a single
 * holder is copied to *one, a list points into the stripe (valid until the
 * stripe changes). */
const uint32_t *kvx_hold_get(kvx_stripe *st, uint64_t seq, uint32_t *one,
			     uint32_t *n);

/* kvx_hold_word_tiers returns lid's tiers in the holder word w of st (0:
 * not a holder). */
uint8_t kvx_hold_word_tiers(const kvx_stripe *st, uint32_t w, uint32_t lid);

/* kvx_hold_put makes lid's tiers for seq tiers (non-zero) and returns the
 * tiers it had (0: it was not a holder). */
uint8_t kvx_hold_put(kvx_stripe *st, uint64_t seq, uint32_t lid, uint8_t tiers);

/* kvx_hold_drop removes lid from seq's holders, if it is one. */
void kvx_hold_drop(kvx_stripe *st, uint64_t seq, uint32_t lid);

/* kvx_hold_prefetch starts loading seq's slot into the cache. */
void kvx_hold_prefetch(kvx_holdmap *h, uint64_t seq);

/* kvx_hold_reserve makes room for n sequence hashes in stripe st. */
void kvx_hold_reserve(kvx_stripe *st, size_t n);

uint64_t kvx_hold_seqs(const kvx_holdmap *h);

/* kvx_hold_bytes adds the bytes h's tables and its holder lists take (as
 * allocated: malloc's own overhead excluded) to *table and *lists. It
 * visits every list. */
void kvx_hold_bytes(const kvx_holdmap *h, uint64_t *table, uint64_t *lists);

/* kvx_hold_save writes h to an image (index_image.c); kvx_hold_load reads
 * it back into h, empty, and is false if the image is refused (what it
 * loaded is then still h's, for kvx_hold_fini). */
void kvx_hold_save(const kvx_holdmap *h, kvx_imgw *w);
bool kvx_hold_load(kvx_holdmap *h, kvx_imgr *r);

#endif /* KVI_SHARD_HOLDERS_H */
