/*
 * table.h - the hash tables the index is built from.
 *
 * kvx_refmap: external hash -> kvx_ref (a sequence hash's prefix and
 *             tiers), one per listener; 12 bytes a slot.
 * kvx_extmap: external hash -> kvx_extval (sequence hash and tiers): the
 *             few entries of a listener whose prefix is not enough
 *             (index_refs.c), and a listener's whole map while the bulk
 *             loader builds it; 17 bytes a slot.
 * kvx_countmap: sequence hash -> count, the sequence hashes of those few.
 * kvx_seqmap: sequence hash -> holder word, one per stripe of a partition;
 *             12 bytes a slot; keys are uniform, so a key's bits after
 *             the stripe's are its slot: slots are in key order (below).
 * kvx_aliasmap: sequence hash -> per-tier reference counts, one per
 *             listener, only for the rare sequence hashes that two external
 *             hashes of one listener share (identical tokens whose engine
 *             hashes differ, e.g. multimodal placeholders).
 *
 * All are instances of table_impl.h (Robin Hood linear probing; see
 * there). None is thread-safe: the index serialises access.
 */
#ifndef KVI_SHARD_TABLE_H
#define KVI_SHARD_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "image_io.h"

/* kvx_table_seed returns a seed for a new table: different tables hash the
 * same key to unrelated slots. Thread-safe. */
static inline uint64_t
kvx_table_seed(void)
{
	static _Atomic uint64_t counter;
	uint64_t x = atomic_fetch_add(&counter, 1) + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Slot arrays of at least this many bytes are mapped from the kernel
 * and unmapped when the table grows or goes, rather than taken from
 * malloc: malloc keeps what a big table frees (its threshold for mapping
 * rises with every big free), and a growing index would hold every size
 * its tables passed through. They are populated at once (MAP_POPULATE):
 * a table's first touch of a page is often a read (the find before an
 * insert), which maps the kernel's shared zero page, and the write after
 * it is then a copy-on-write fault that flushes the TLB of every core the
 * process runs on. With the bulk loader's threads on both cores that was
 * an interrupt to the other core per 4 KiB, a third of a restart.
 *
 * The threshold is low (a 1,024-slot listener map) because the arrays a
 * growing table leaves behind in malloc's heap are holes nothing else of
 * the index fills: they stay resident. At 64 KiB they were 3.5 bytes of
 * the resident size per entry at 10M entries (bench_shard). */
#define KVX_TABLE_MAP_MIN ((size_t)16 << 10)

/* kvx_table_alloc returns n zeroed bytes for a slot array. */
static inline void *
kvx_table_alloc(size_t n)
{
	if (n < KVX_TABLE_MAP_MIN) {
		return kvi_calloc(1, n);
	}
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED) {
		kvi_oom(n);
	}
	return p;
}

/* kvx_table_free frees what kvx_table_alloc(n) returned. */
static inline void
kvx_table_free(void *p, size_t n)
{
	if (n < KVX_TABLE_MAP_MIN) {
		kvi_free(p);
	} else if (p != NULL) {
		munmap(p, n);
	}
}

/* kvx_table_shrink returns a slot array of to bytes holding the first to
 * bytes of p, an array of from >= to bytes from kvx_table_alloc(), which
 * it frees or shrinks in place. */
static inline void *
kvx_table_shrink(void *p, size_t from, size_t to)
{
	if (from < KVX_TABLE_MAP_MIN) {
		return kvi_realloc(p, to);
	}
	if (to >= KVX_TABLE_MAP_MIN) {
		/* mremap shrinks in place: what is past to goes. */
		void *q = mremap(p, from, to, 0);
		if (q == MAP_FAILED) {
			kvi_oom(to);
		}
		return q;
	}
	void *q = kvi_malloc(to);
	memcpy(q, p, to);
	munmap(p, from);
	return q;
}

typedef struct __attribute__((packed)) kvx_extval {
	uint64_t seq;
	uint8_t tiers; /* bit per kvi_tier */
} kvx_extval;

/* A holder word (see holders.h). Values are packed structs so that pointers
 * to them inside packed slots are well-defined. */
typedef struct __attribute__((packed)) kvx_holder {
	uint32_t w;
} kvx_holder;

/* Per-tier counts of external hashes sharing one sequence hash. */
typedef struct __attribute__((packed)) kvx_aliasval {
	uint16_t count[3];
	uint16_t total;
} kvx_aliasval;

#define TBL     kvx_extmap
#define TBL_VAL kvx_extval
#include "table_impl.h"

/* Sequence hashes are XXH3 outputs: uniform. Their top KVX_STRIPE_BITS
 * pick the stripe (holders.h), the next bits the slot. Nothing outside
 * kvindex chooses them except by choosing tokens, and XXH3 makes steering
 * them to one slot as costly as the flood would be. */
#define KVX_STRIPE_BITS  8
#define TBL              kvx_seqmap
#define TBL_VAL          kvx_holder
#define TBL_UNIFORM_SKIP KVX_STRIPE_BITS
#include "table_impl.h"

#define TBL     kvx_aliasmap
#define TBL_VAL kvx_aliasval
#include "table_impl.h"

/* A reference to a sequence hash: its top KVX_REF_BITS bits, and the tiers
 * of the entry (index_refs.c says how it is resolved). */
#define KVX_REF_BITS        29
#define KVX_REF_PREFIX(seq) ((uint32_t)((seq) >> (64 - KVX_REF_BITS)))
#define KVX_REF(seq, tiers) (KVX_REF_PREFIX(seq) << 3 | (uint32_t)(tiers))
#define KVX_REF_OF(r)       ((r) >> 3)
#define KVX_REF_TIERS(r)    ((uint8_t)((r)&7u))

typedef struct __attribute__((packed)) kvx_ref {
	uint32_t r;
} kvx_ref;

typedef struct __attribute__((packed)) kvx_count {
	uint32_t n;
} kvx_count;

#define TBL     kvx_refmap
#define TBL_VAL kvx_ref
#include "table_impl.h"

#define TBL     kvx_countmap
#define TBL_VAL kvx_count
#include "table_impl.h"

#endif /* KVI_SHARD_TABLE_H */
