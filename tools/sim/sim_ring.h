/*
 * sim_ring.h - a bounded buffer of the last batches of one rank, by seq.
 *
 * A rank keeps two of these: the replay buffer (encoded payloads, answered
 * on the replay socket) and the recover log (the batches' events in a compact
 * form, answered by /kv_recover). Seqs are contiguous: entries are put with
 * seq 0, 1, 2, ... and when the ring is full the oldest entry is dropped.
 * The entry array grows with use up to the capacity, so a large capacity on
 * a thousand idle ranks costs nothing.
 *
 * The ring owns the data of its entries (freed with kvi_free). No locking:
 * the rank's mutex protects it.
 */
#ifndef KVI_SIM_RING_H
#define KVI_SIM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sim_ring_entry {
	uint64_t seq;
	void *data;
	size_t len;
	unsigned flags; /* the caller's */
} sim_ring_entry;

typedef struct sim_ring {
	sim_ring_entry *entries;
	size_t cap;     /* maximum number of entries; 0 keeps nothing */
	size_t alloc;   /* entries allocated so far */
	uint64_t next;  /* seq of the next put */
	uint64_t count; /* entries held: seqs [next - count, next) */
} sim_ring;

void sim_ring_init(sim_ring *r, size_t cap);
/* sim_ring_fini frees every entry; the ring may be initialised again. */
void sim_ring_fini(sim_ring *r);
/* sim_ring_clear drops every entry and restarts seqs at 0. */
void sim_ring_clear(sim_ring *r);

/* sim_ring_put stores data (len bytes, taken over: freed by the ring) under
 * the next seq and returns that seq, dropping the oldest entry when full. */
uint64_t sim_ring_put(sim_ring *r, void *data, size_t len, unsigned flags);

/* sim_ring_get returns the entry of seq, or NULL when the ring does not
 * hold it. Valid until the next put, clear or fini. */
sim_ring_entry *sim_ring_get(const sim_ring *r, uint64_t seq);

/* sim_ring_oldest writes the oldest held seq into *seq and returns true, or
 * returns false when the ring is empty. */
bool sim_ring_oldest(const sim_ring *r, uint64_t *seq);

#endif /* KVI_SIM_RING_H */
