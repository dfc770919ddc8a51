#include "rendezvous.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"

uint64_t
kvc_rdv_weight(const char *shard_id, const char *key)
{
	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	/* strlen + 1 takes the NUL as the separator */
	XXH3_64bits_update(&st, shard_id, strlen(shard_id) + 1);
	XXH3_64bits_update(&st, key, strlen(key));
	return XXH3_64bits_digest(&st);
}

size_t
kvc_rdv_pick_index(const char *const *shard_ids, size_t n, const bool *eligible,
		   const char *key)
{
	size_t best = KVC_RDV_NONE;
	uint64_t best_w = 0;
	for (size_t i = 0; i < n; i++) {
		if (eligible != NULL && !eligible[i]) {
			continue;
		}
		uint64_t w = kvc_rdv_weight(shard_ids[i], key);
		if (best == KVC_RDV_NONE || w > best_w ||
		    (w == best_w &&
		     strcmp(shard_ids[i], shard_ids[best]) < 0)) {
			best = i;
			best_w = w;
		}
	}
	return best;
}

const char *
kvc_rdv_pick(const char *const *shard_ids, size_t n, const bool *eligible,
	     const char *key)
{
	size_t i = kvc_rdv_pick_index(shard_ids, n, eligible, key);
	return i == KVC_RDV_NONE ? NULL : shard_ids[i];
}

/* Pins are few (set by hand through the admin API), so a sorted array
 * with binary search is both the simplest and a fast enough table. */
typedef struct kvc_rdv_pin {
	char *key;
	char *shard_id;
} kvc_rdv_pin;

struct kvc_rdv_pins {
	kvc_rdv_pin *v;
	size_t n, cap;
};

kvc_rdv_pins *
kvc_rdv_pins_alloc(void)
{
	return kvi_calloc(1, sizeof(kvc_rdv_pins));
}

void
kvc_rdv_pins_free(kvc_rdv_pins *p)
{
	if (p == NULL) {
		return;
	}
	for (size_t i = 0; i < p->n; i++) {
		kvi_free(p->v[i].key);
		kvi_free(p->v[i].shard_id);
	}
	kvi_free(p->v);
	kvi_free(p);
}

/* rdv_pins_find returns key's position, or where it would go; *found
 * says which. */
static size_t
rdv_pins_find(const kvc_rdv_pins *p, const char *key, bool *found)
{
	size_t lo = 0, hi = p->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(p->v[mid].key, key);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	*found = false;
	return lo;
}

void
kvc_rdv_pins_set(kvc_rdv_pins *p, const char *key, const char *shard_id)
{
	bool found;
	size_t at = rdv_pins_find(p, key, &found);
	if (found) {
		kvi_free(p->v[at].shard_id);
		p->v[at].shard_id = kvi_strdup(shard_id);
		return;
	}
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 8;
		p->v = kvi_reallocarray(p->v, p->cap, sizeof(*p->v));
	}
	memmove(&p->v[at + 1], &p->v[at], (p->n - at) * sizeof(*p->v));
	p->v[at].key = kvi_strdup(key);
	p->v[at].shard_id = kvi_strdup(shard_id);
	p->n++;
}

bool
kvc_rdv_pins_unset(kvc_rdv_pins *p, const char *key)
{
	bool found;
	size_t at = rdv_pins_find(p, key, &found);
	if (!found) {
		return false;
	}
	kvi_free(p->v[at].key);
	kvi_free(p->v[at].shard_id);
	memmove(&p->v[at], &p->v[at + 1], (p->n - at - 1) * sizeof(*p->v));
	p->n--;
	return true;
}

const char *
kvc_rdv_pins_get(const kvc_rdv_pins *p, const char *key)
{
	bool found;
	size_t at = rdv_pins_find(p, key, &found);
	return found ? p->v[at].shard_id : NULL;
}

size_t
kvc_rdv_pins_count(const kvc_rdv_pins *p)
{
	return p->n;
}

void
kvc_rdv_pins_at(const kvc_rdv_pins *p, size_t i, const char **key,
		const char **shard_id)
{
	*key = p->v[i].key;
	*shard_id = p->v[i].shard_id;
}

size_t
kvc_rdv_assign(const kvc_rdv_pins *pins, const char *const *shard_ids, size_t n,
	       const bool *eligible, const char *key, bool *pinned)
{
	const char *to = pins != NULL ? kvc_rdv_pins_get(pins, key) : NULL;
	for (size_t i = 0; to != NULL && i < n; i++) {
		if ((eligible == NULL || eligible[i]) &&
		    strcmp(shard_ids[i], to) == 0) {
			if (pinned != NULL) {
				*pinned = true;
			}
			return i;
		}
	}
	if (pinned != NULL) {
		*pinned = false;
	}
	return kvc_rdv_pick_index(shard_ids, n, eligible, key);
}
