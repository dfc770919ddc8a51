#include "kube_table.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"

typedef struct kvc_kt_entry {
	kvc_kube_pod p;
	size_t ns;
	int64_t not_ready_since; /* 0 while Ready */
	bool published;          /* in the last desired set */
} kvc_kt_entry;

struct kvc_kube_table {
	kvc_kt_entry *e; /* sorted by p.key */
	size_t n, cap;
	bool *listed; /* per namespace */
	size_t n_ns;
	int64_t grace_ms;
	bool have_last;
	kvc_pod *last; /* deep copies of the last desired set */
	size_t n_last;
	kvc_pod *out; /* shallow: the set handed out */
	size_t cap_out;
};

kvc_kube_table *
kvc_kube_table_alloc(size_t n_ns, int64_t grace_ms)
{
	kvc_kube_table *t = kvi_calloc(1, sizeof(*t));
	t->listed = kvi_calloc(n_ns ? n_ns : 1, sizeof(*t->listed));
	t->n_ns = n_ns;
	t->grace_ms = grace_ms;
	return t;
}

static void
kt_last_clear(kvc_kube_table *t)
{
	for (size_t i = 0; i < t->n_last; i++) {
		kvc_pod_fini(&t->last[i]);
	}
	kvi_free(t->last);
	t->last = NULL;
	t->n_last = 0;
}

void
kvc_kube_table_free(kvc_kube_table *t)
{
	if (t == NULL) {
		return;
	}
	for (size_t i = 0; i < t->n; i++) {
		kvc_kube_pod_fini(&t->e[i].p);
	}
	kvi_free(t->e);
	kvi_free(t->listed);
	kt_last_clear(t);
	kvi_free(t->out);
	kvi_free(t);
}

/* kt_find returns the index of key, or where it would go (*found
 * false). */
static size_t
kt_find(const kvc_kube_table *t, const char *key, bool *found)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(t->e[mid].p.key, key);
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

/* kt_note_bad logs a Ready pod that cannot be registered, once per
 * reason. */
static void
kt_note_bad(const kvc_kube_pod *old, const kvc_kube_pod *p)
{
	if (p->valid || !p->ready || p->terminating || p->ip == NULL) {
		return;
	}
	if (old != NULL && !old->valid && old->ready &&
	    strcmp(old->why, p->why) == 0) {
		return;
	}
	char qk[300], qw[300];
	KVI_WARN("kube_pod_skipped", "pod=%s why=%s",
		 kvi_log_quote(qk, sizeof(qk), p->key),
		 kvi_log_quote(qw, sizeof(qw), p->why));
}

/* kt_carry sets e's NotReady clock and published flag for its new
 * pod p, given the entry's previous pod old (NULL: new pod). */
static void
kt_carry(kvc_kt_entry *e, const kvc_kube_pod *old, const kvc_kube_pod *p,
	 int64_t now_ms)
{
	if (old == NULL || strcmp(old->uid, p->uid) != 0) {
		e->published = false;
		e->not_ready_since = p->ready ? 0 : now_ms;
		return;
	}
	if (p->ready) {
		e->not_ready_since = 0;
	} else if (old->ready || e->not_ready_since == 0) {
		e->not_ready_since = now_ms > 0 ? now_ms : 1;
	}
}

void
kvc_kube_table_upsert(kvc_kube_table *t, size_t ns, kvc_kube_pod *p,
		      int64_t now_ms)
{
	bool found;
	size_t i = kt_find(t, p->key, &found);
	if (found) {
		kvc_kt_entry *e = &t->e[i];
		kt_note_bad(&e->p, p);
		kt_carry(e, &e->p, p, now_ms);
		kvc_kube_pod_move(&e->p, p);
		e->ns = ns;
		return;
	}
	kt_note_bad(NULL, p);
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->e = kvi_reallocarray(t->e, t->cap, sizeof(*t->e));
	}
	memmove(&t->e[i + 1], &t->e[i], (t->n - i) * sizeof(*t->e));
	t->n++;
	kvc_kt_entry *e = &t->e[i];
	memset(e, 0, sizeof(*e));
	e->ns = ns;
	kt_carry(e, NULL, p, now_ms);
	kvc_kube_pod_move(&e->p, p);
}

bool
kvc_kube_table_delete(kvc_kube_table *t, const char *key)
{
	bool found;
	size_t i = kt_find(t, key, &found);
	if (!found) {
		return false;
	}
	kvc_kube_pod_fini(&t->e[i].p);
	memmove(&t->e[i], &t->e[i + 1], (t->n - i - 1) * sizeof(*t->e));
	t->n--;
	return true;
}

static int
kt_by_key(const void *a, const void *b)
{
	const kvc_kt_entry *x = a, *y = b;
	return strcmp(x->p.key, y->p.key);
}

void
kvc_kube_table_replace(kvc_kube_table *t, size_t ns, kvc_kube_pod *pods,
		       size_t n, int64_t now_ms)
{
	/* find every listed pod's entry before the table changes */
	size_t *old = kvi_calloc(n + 1, sizeof(*old));
	for (size_t k = 0; k < n; k++) {
		bool found;
		size_t i = kt_find(t, pods[k].key, &found);
		old[k] = found && t->e[i].ns == ns ? i : SIZE_MAX;
	}
	size_t cap = t->n + n + 1;
	kvc_kt_entry *ne = kvi_calloc(cap, sizeof(*ne));
	bool *taken = kvi_calloc(t->n + 1, sizeof(*taken));
	size_t m = 0;
	/* the new list's pods, carrying what the table knew of each */
	for (size_t k = 0; k < n; k++) {
		kvc_kt_entry *e = &ne[m++];
		const kvc_kube_pod *prev = NULL;
		if (old[k] != SIZE_MAX && !taken[old[k]]) {
			kvc_kt_entry *o = &t->e[old[k]];
			e->not_ready_since = o->not_ready_since;
			e->published = o->published;
			prev = &o->p;
			taken[old[k]] = true;
		}
		e->ns = ns;
		kt_note_bad(prev, &pods[k]);
		kt_carry(e, prev, &pods[k], now_ms);
		kvc_kube_pod_move(&e->p, &pods[k]);
	}
	/* other namespaces stay; this one's old entries all go (the pods
	 * still listed were carried above) */
	for (size_t i = 0; i < t->n; i++) {
		if (t->e[i].ns == ns) {
			kvc_kube_pod_fini(&t->e[i].p);
		} else {
			ne[m++] = t->e[i];
		}
	}
	kvi_free(taken);
	kvi_free(old);
	qsort(ne, m, sizeof(*ne), kt_by_key);
	/* a list never names a pod twice; if one did, keep the later */
	size_t w = 0;
	for (size_t i = 0; i < m; i++) {
		if (w > 0 && strcmp(ne[w - 1].p.key, ne[i].p.key) == 0) {
			kvc_kube_pod_fini(&ne[w - 1].p);
			w--;
		}
		ne[w++] = ne[i];
	}
	kvi_free(t->e);
	t->e = ne;
	t->n = w;
	t->cap = cap;
	if (ns < t->n_ns) {
		t->listed[ns] = true;
	}
}

bool
kvc_kube_table_synced(const kvc_kube_table *t)
{
	for (size_t i = 0; i < t->n_ns; i++) {
		if (!t->listed[i]) {
			return false;
		}
	}
	return true;
}

/* kt_eligible says whether e is registered at now_ms and lowers
 * *next_ms to when that can change by the clock. */
static bool
kt_eligible(const kvc_kube_table *t, const kvc_kt_entry *e, int64_t now_ms,
	    int64_t *next_ms)
{
	const kvc_kube_pod *p = &e->p;
	if (!p->valid || p->terminating) {
		return false;
	}
	if (p->ready) {
		return true;
	}
	if (!e->published || e->not_ready_since == 0) {
		return false;
	}
	int64_t deadline = e->not_ready_since + t->grace_ms;
	if (now_ms >= deadline) {
		return false;
	}
	if (*next_ms < 0 || deadline < *next_ms) {
		*next_ms = deadline;
	}
	return true;
}

bool
kvc_kube_table_desired(kvc_kube_table *t, int64_t now_ms, const kvc_pod **pods,
		       size_t *n, int64_t *next_ms)
{
	*next_ms = -1;
	if (!kvc_kube_table_synced(t)) {
		return false;
	}
	if (t->cap_out < t->n + 1) {
		t->cap_out = t->n + 1;
		t->out = kvi_reallocarray(t->out, t->cap_out, sizeof(*t->out));
	}
	size_t m = 0;
	for (size_t i = 0; i < t->n; i++) {
		kvc_kt_entry *e = &t->e[i];
		e->published = kt_eligible(t, e, now_ms, next_ms);
		if (e->published) {
			t->out[m++] = e->p.pod;
		}
	}
	bool changed = !t->have_last || m != t->n_last;
	for (size_t i = 0; !changed && i < m; i++) {
		changed = !kvc_pod_equal(&t->out[i], &t->last[i]);
	}
	if (changed) {
		kt_last_clear(t);
		t->last = kvi_calloc(m + 1, sizeof(*t->last));
		for (size_t i = 0; i < m; i++) {
			kvc_pod_copy(&t->last[i], &t->out[i]);
		}
		t->n_last = m;
		t->have_last = true;
	}
	*pods = t->out;
	*n = m;
	return changed;
}

void
kvc_kube_table_stats_get(const kvc_kube_table *t, kvc_kube_table_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->pods = t->n;
	for (size_t i = 0; i < t->n; i++) {
		const kvc_kt_entry *e = &t->e[i];
		const kvc_kube_pod *p = &e->p;
		if (e->published) {
			out->registered++;
			out->not_ready += !p->ready;
		}
		if (!p->valid && p->ready && p->ip != NULL && !p->terminating) {
			out->unregistrable++;
		}
	}
}
