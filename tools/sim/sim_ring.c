#include "sim_ring.h"

#include <string.h>

#include "alloc.h"

void
sim_ring_init(sim_ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->cap = cap;
}

void
sim_ring_clear(sim_ring *r)
{
	for (uint64_t i = 0; i < r->count; i++) {
		sim_ring_entry *e = sim_ring_get(r, r->next - r->count + i);
		kvi_free(e->data);
		e->data = NULL;
	}
	r->next = 0;
	r->count = 0;
}

void
sim_ring_fini(sim_ring *r)
{
	sim_ring_clear(r);
	kvi_free(r->entries);
	r->entries = NULL;
	r->alloc = 0;
}

/* Seqs start at 0 after every clear, so seq % cap is the slot both while
 * the array is still growing (seq < alloc) and once it wraps. */
sim_ring_entry *
sim_ring_get(const sim_ring *r, uint64_t seq)
{
	if (r->count == 0 || seq >= r->next || seq < r->next - r->count) {
		return NULL;
	}
	return &r->entries[seq % r->cap];
}

uint64_t
sim_ring_put(sim_ring *r, void *data, size_t len, unsigned flags)
{
	uint64_t seq = r->next++;
	if (r->cap == 0) {
		kvi_free(data);
		return seq;
	}
	size_t slot = (size_t)(seq % r->cap);
	if (r->count == r->cap) {
		kvi_free(r->entries[slot].data);
		r->count--;
	} else if (slot >= r->alloc) {
		size_t n = r->alloc ? r->alloc * 2 : 64;
		r->alloc = n < r->cap ? n : r->cap;
		r->entries =
		    kvi_reallocarray(r->entries, r->alloc, sizeof(*r->entries));
	}
	r->entries[slot] = (sim_ring_entry){
	    .seq = seq, .data = data, .len = len, .flags = flags};
	r->count++;
	return seq;
}

bool
sim_ring_oldest(const sim_ring *r, uint64_t *seq)
{
	if (r->count == 0) {
		return false;
	}
	*seq = r->next - r->count;
	return true;
}
