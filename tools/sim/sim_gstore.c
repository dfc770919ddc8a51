#include "sim_gstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define NIL SIM_GSTORE_NIL

void
sim_gstore_init(sim_gstore *s, uint32_t cap)
{
	memset(s, 0, sizeof(*s));
	s->cap = cap;
	/* calloc: pages are committed only as slots are first used. */
	s->slots = kvi_calloc(cap, sizeof(*s->slots));
	uint32_t size = 16;
	unsigned bits = 4;
	while (size < 2 * cap) {
		size *= 2;
		bits++;
	}
	s->table = kvi_calloc(size, sizeof(*s->table));
	s->mask = size - 1;
	s->shift = 64 - bits;
	sim_gstore_clear(s);
}

void
sim_gstore_fini(sim_gstore *s)
{
	kvi_free(s->slots);
	kvi_free(s->table);
	memset(s, 0, sizeof(*s));
}

void
sim_gstore_clear(sim_gstore *s)
{
	if (s->high > 0) {
		memset(s->table, 0, (s->mask + 1) * sizeof(*s->table));
		memset(s->slots, 0, s->high * sizeof(*s->slots));
	}
	s->high = 0;
	s->free_head = NIL;
	s->head = s->tail = NIL;
	s->count = 0;
}

static uint32_t
home(const sim_gstore *s, uint64_t ext)
{
	return (uint32_t)((ext * 0x9e3779b97f4a7c15u) >> s->shift) & s->mask;
}

uint32_t
sim_gstore_find(const sim_gstore *s, uint64_t ext)
{
	for (uint32_t i = home(s, ext);; i = (i + 1) & s->mask) {
		uint32_t v = s->table[i];
		if (v == 0) {
			return NIL;
		}
		if (s->slots[v - 1].ext == ext) {
			return v - 1;
		}
	}
}

static void
table_insert(sim_gstore *s, uint32_t slot)
{
	uint32_t i = home(s, s->slots[slot].ext);
	while (s->table[i] != 0) {
		i = (i + 1) & s->mask;
	}
	s->table[i] = slot + 1;
}

/* table_delete removes slot with backward-shift deletion (no tombstones),
 * as sim_cache.c does. */
static void
table_delete(sim_gstore *s, uint32_t slot)
{
	uint32_t i = home(s, s->slots[slot].ext);
	while (s->table[i] != slot + 1) {
		i = (i + 1) & s->mask;
	}
	s->table[i] = 0;
	for (uint32_t j = (i + 1) & s->mask; s->table[j] != 0;
	     j = (j + 1) & s->mask) {
		uint32_t k = home(s, s->slots[s->table[j] - 1].ext);
		bool stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
		if (!stays) {
			s->table[i] = s->table[j];
			s->table[j] = 0;
			i = j;
		}
	}
}

static void
unlink_slot(sim_gstore *s, uint32_t slot)
{
	sim_gslot *b = &s->slots[slot];
	if (b->prev != NIL) {
		s->slots[b->prev].next = b->next;
	} else {
		s->head = b->next;
	}
	if (b->next != NIL) {
		s->slots[b->next].prev = b->prev;
	} else {
		s->tail = b->prev;
	}
	s->count--;
}

static void
push_head(sim_gstore *s, uint32_t slot)
{
	sim_gslot *b = &s->slots[slot];
	b->prev = NIL;
	b->next = s->head;
	if (s->head != NIL) {
		s->slots[s->head].prev = slot;
	} else {
		s->tail = slot;
	}
	s->head = slot;
	s->count++;
}

uint32_t
sim_gstore_insert(sim_gstore *s, const sim_gslot *b, uint32_t stamp)
{
	if (s->count == s->cap) {
		/* the caller pinned more than the store holds: its blocks
		 * would overrun the slots */
		fprintf(stderr, "sim_gstore: insert into a full store\n");
		abort();
	}
	uint32_t slot;
	if (s->free_head != NIL) {
		slot = s->free_head;
		s->free_head = s->slots[slot].next;
	} else {
		slot = s->high++;
	}
	s->slots[slot] = *b;
	s->slots[slot].used = true;
	s->slots[slot].pin = stamp;
	table_insert(s, slot);
	push_head(s, slot);
	return slot;
}

void
sim_gstore_release(sim_gstore *s, uint32_t slot)
{
	unlink_slot(s, slot);
	push_head(s, slot);
}

uint32_t
sim_gstore_evict(sim_gstore *s, uint32_t count, uint32_t stamp, uint64_t *out)
{
	uint32_t done = 0;
	uint32_t slot = s->tail;
	while (done < count && slot != NIL) {
		uint32_t prev = s->slots[slot].prev;
		if (s->slots[slot].pin != stamp) {
			unlink_slot(s, slot);
			table_delete(s, slot);
			out[done++] = s->slots[slot].ext;
			s->slots[slot].used = false;
			s->slots[slot].next = s->free_head;
			s->free_head = slot;
		}
		slot = prev;
	}
	return done;
}

uint32_t
sim_gstore_free_slots(const sim_gstore *s)
{
	return s->cap - s->count;
}
