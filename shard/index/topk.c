#include "topk.h"

#include <string.h>

#include "rank.h"

int
kvh_topk_cmp(const kvh_topk_entry *a, const kvh_topk_entry *b)
{
	kvi_rank_key ka = kvi_rank_key_of(a->longest + a->pending, a->gpu,
					  a->instance_id, a->dp_rank);
	kvi_rank_key kb = kvi_rank_key_of(b->longest + b->pending, b->gpu,
					  b->instance_id, b->dp_rank);
	return kvi_rank_cmp(&ka, &kb);
}

void
kvh_topk_init(kvh_topk *t, size_t k, kvp_arena *a)
{
	*t = (kvh_topk){.k = k, .arena = a};
}

/* topk_grow makes room for one more kept entry (n < k). */
static void
topk_grow(kvh_topk *t)
{
	size_t cap = t->cap ? t->cap * 2 : 16;
	cap = cap < t->k ? cap : t->k;
	kvh_topk_entry *e = kvp_arena_alloc(t->arena, cap * sizeof(*e));
	if (t->n > 0) {
		memcpy(e, t->e, t->n * sizeof(*e));
	}
	t->e = e;
	t->cap = cap;
}

/* worse: is entry i of the heap worse than entry j? */
static int
worse(const kvh_topk *t, size_t i, size_t j)
{
	return kvh_topk_cmp(&t->e[i], &t->e[j]) > 0;
}

static void
swap(kvh_topk *t, size_t i, size_t j)
{
	kvh_topk_entry x = t->e[i];
	t->e[i] = t->e[j];
	t->e[j] = x;
}

void
kvh_topk_add(kvh_topk *t, const kvh_topk_entry *m)
{
	if (t->n < t->k) {
		if (t->n == t->cap) {
			topk_grow(t);
		}
		size_t i = t->n++;
		t->e[i] = *m;
		while (i > 0 && worse(t, i, (i - 1) / 2)) {
			swap(t, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
		return;
	}
	if (kvh_topk_cmp(m, &t->e[0]) >= 0) {
		return; /* no better than the worst kept */
	}
	t->e[0] = *m;
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		if (l < t->n && worse(t, l, w)) {
			w = l;
		}
		if (r < t->n && worse(t, r, w)) {
			w = r;
		}
		if (w == i) {
			return;
		}
		swap(t, i, w);
		i = w;
	}
}
