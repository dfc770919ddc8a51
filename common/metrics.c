/*
 * metrics.c - the metrics registry (metrics.h): registration of families,
 * the registry itself and the handles hot paths update. Rendering and the
 * collector writer are in metrics_text.c.
 */
#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "metrics_int.h"

/* What one registration asks for. */
typedef struct family_spec {
	const char *name;
	const char *help;
	kvi_metric_type type;
	kvi_gauge_kind kind;
	const double *bounds;
	size_t n_bounds;
	const char *label;
	const char *const *values;
	size_t n;
} family_spec;

static uint64_t
double_bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

static double
bits_double(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

/* atomic_add_double adds d to the double whose bits *p holds. */
static void
atomic_add_double(_Atomic uint64_t *p, double d)
{
	uint64_t old = atomic_load_explicit(p, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(
	    p, &old, double_bits(bits_double(old) + d), memory_order_relaxed,
	    memory_order_relaxed)) {
	}
}

static int64_t
round_i64(double v)
{
	if (isnan(v)) {
		return 0;
	}
	if (v >= 9223372036854775807.0) {
		return INT64_MAX;
	}
	if (v <= -9223372036854775808.0) {
		return INT64_MIN;
	}
	return (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
}

/* ---- names ---- */

bool
kvi_metrics_name_valid(const char *s)
{
	if (s == NULL || *s == '\0') {
		return false;
	}
	for (const char *p = s; *p != '\0'; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     c == '_' || c == ':';
		if (!alpha && !(p != s && c >= '0' && c <= '9')) {
			return false;
		}
	}
	return true;
}

bool
kvi_metrics_label_name_valid(const char *s)
{
	if (!kvi_metrics_name_valid(s) || strchr(s, ':') != NULL) {
		return false;
	}
	return strncmp(s, "__", 2) != 0;
}

/* ---- families ---- */

static void
family_free(family *f)
{
	if (f == NULL) {
		return;
	}
	for (size_t i = 0; f->values != NULL && i < f->n; i++) {
		kvi_free(f->values[i]);
	}
	for (size_t i = 0; f->histograms != NULL && i < f->n; i++) {
		kvi_free(f->histograms[i].counts);
	}
	kvi_free(f->values);
	kvi_free(f->histograms);
	kvi_free(f->gauges);
	kvi_free(f->counters);
	kvi_free(f->bounds);
	kvi_free(f->label);
	kvi_free(f->help);
	kvi_free(f->name);
	kvi_free(f);
}

static kvi_err
spec_check(const family_spec *s)
{
	if (!kvi_metrics_name_valid(s->name) || s->n == 0) {
		return KVI_EINVAL;
	}
	if (s->label == NULL && s->n != 1) {
		return KVI_EINVAL;
	}
	if (s->label != NULL) {
		if (s->values == NULL) {
			return KVI_EINVAL;
		}
		if (!kvi_metrics_label_name_valid(s->label)) {
			return KVI_EINVAL;
		}
		if (s->type == KVI_METRIC_HISTOGRAM &&
		    strcmp(s->label, "le") == 0) {
			return KVI_EINVAL;
		}
		for (size_t i = 0; i < s->n; i++) {
			if (s->values[i] == NULL) {
				return KVI_EINVAL;
			}
			for (size_t j = 0; j < i; j++) {
				if (strcmp(s->values[i], s->values[j]) == 0) {
					return KVI_EINVAL;
				}
			}
		}
	}
	if (s->type == KVI_METRIC_HISTOGRAM) {
		if (s->n_bounds > KVI_HISTOGRAM_MAX_BOUNDS) {
			return KVI_EINVAL;
		}
		for (size_t i = 0; i < s->n_bounds; i++) {
			if (!isfinite(s->bounds[i]) ||
			    (i > 0 && s->bounds[i] <= s->bounds[i - 1])) {
				return KVI_EINVAL;
			}
		}
	}
	return KVI_OK;
}

static family *
family_build(const family_spec *s)
{
	family *f = kvi_calloc(1, sizeof(*f));
	f->name = kvi_strdup(s->name);
	f->help = kvi_strdup(s->help ? s->help : "");
	f->type = s->type;
	f->n = s->n;
	if (s->label != NULL) {
		f->label = kvi_strdup(s->label);
		f->values = kvi_calloc(s->n, sizeof(*f->values));
		for (size_t i = 0; i < s->n; i++) {
			f->values[i] = kvi_strdup(s->values[i]);
		}
	}
	switch (s->type) {
	case KVI_METRIC_COUNTER:
		f->counters = kvi_calloc(s->n, sizeof(*f->counters));
		break;
	case KVI_METRIC_GAUGE:
		f->gauges = kvi_calloc(s->n, sizeof(*f->gauges));
		for (size_t i = 0; i < s->n; i++) {
			f->gauges[i].kind = s->kind;
			atomic_init(&f->gauges[i].v, s->kind == KVI_GAUGE_DOUBLE
							 ? double_bits(0.0)
							 : 0);
		}
		break;
	case KVI_METRIC_HISTOGRAM:
		f->n_bounds = s->n_bounds;
		f->bounds = kvi_calloc(s->n_bounds, sizeof(double));
		if (s->n_bounds > 0) {
			memcpy(f->bounds, s->bounds,
			       s->n_bounds * sizeof(double));
		}
		f->histograms = kvi_calloc(s->n, sizeof(*f->histograms));
		for (size_t i = 0; i < s->n; i++) {
			kvi_histogram *h = &f->histograms[i];
			h->bounds = f->bounds;
			h->n_bounds = f->n_bounds;
			h->counts =
			    kvi_calloc(s->n_bounds + 1, sizeof(*h->counts));
			atomic_init(&h->sum_bits, double_bits(0.0));
		}
		break;
	case KVI_METRIC_UNTYPED:
		break;
	}
	return f;
}

/* family_add validates s, builds its family and appends it to m.
 * Returns KVI_EINVAL or KVI_EEXIST; *out is written only on success. */
static kvi_err
family_add(kvi_metrics *m, const family_spec *s, family **out)
{
	kvi_err err = spec_check(s);
	if (err != KVI_OK) {
		return err;
	}
	family *f = family_build(s);
	pthread_mutex_lock(&m->mu);
	for (family *g = m->families; g != NULL; g = g->next) {
		if (strcmp(g->name, f->name) == 0) {
			pthread_mutex_unlock(&m->mu);
			family_free(f);
			return KVI_EEXIST;
		}
	}
	*m->families_tail = f;
	m->families_tail = &f->next;
	pthread_mutex_unlock(&m->mu);
	*out = f;
	return KVI_OK;
}

/* ---- registry ---- */

kvi_metrics *
kvi_metrics_alloc(void)
{
	kvi_metrics *m = kvi_calloc(1, sizeof(*m));
	pthread_mutex_init(&m->mu, NULL);
	m->families_tail = &m->families;
	m->collectors_tail = &m->collectors;
	return m;
}

void
kvi_metrics_free(kvi_metrics *m)
{
	if (m == NULL) {
		return;
	}
	while (m->families != NULL) {
		family *f = m->families;
		m->families = f->next;
		family_free(f);
	}
	while (m->collectors != NULL) {
		collector *c = m->collectors;
		m->collectors = c->next;
		kvi_free(c);
	}
	pthread_mutex_destroy(&m->mu);
	kvi_free(m);
}

kvi_err
kvi_metrics_counter_add(kvi_metrics *m, const char *name, const char *help,
			kvi_counter **out)
{
	return kvi_metrics_counter_vec_add(m, name, help, NULL, NULL, 1, out);
}

kvi_err
kvi_metrics_counter_vec_add(kvi_metrics *m, const char *name, const char *help,
			    const char *label, const char *const *values,
			    size_t n, kvi_counter **out)
{
	family_spec s = {.name = name,
			 .help = help,
			 .type = KVI_METRIC_COUNTER,
			 .label = label,
			 .values = values,
			 .n = n};
	family *f;
	kvi_err err = family_add(m, &s, &f);
	if (err != KVI_OK) {
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = &f->counters[i];
	}
	return KVI_OK;
}

kvi_err
kvi_metrics_gauge_add(kvi_metrics *m, const char *name, const char *help,
		      kvi_gauge_kind kind, kvi_gauge **out)
{
	return kvi_metrics_gauge_vec_add(m, name, help, kind, NULL, NULL, 1,
					 out);
}

kvi_err
kvi_metrics_gauge_vec_add(kvi_metrics *m, const char *name, const char *help,
			  kvi_gauge_kind kind, const char *label,
			  const char *const *values, size_t n, kvi_gauge **out)
{
	family_spec s = {.name = name,
			 .help = help,
			 .type = KVI_METRIC_GAUGE,
			 .kind = kind,
			 .label = label,
			 .values = values,
			 .n = n};
	family *f;
	kvi_err err = family_add(m, &s, &f);
	if (err != KVI_OK) {
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = &f->gauges[i];
	}
	return KVI_OK;
}

kvi_err
kvi_metrics_histogram_add(kvi_metrics *m, const char *name, const char *help,
			  const double *bounds, size_t n_bounds,
			  kvi_histogram **out)
{
	return kvi_metrics_histogram_vec_add(m, name, help, bounds, n_bounds,
					     NULL, NULL, 1, out);
}

kvi_err
kvi_metrics_histogram_vec_add(kvi_metrics *m, const char *name,
			      const char *help, const double *bounds,
			      size_t n_bounds, const char *label,
			      const char *const *values, size_t n,
			      kvi_histogram **out)
{
	family_spec s = {.name = name,
			 .help = help,
			 .type = KVI_METRIC_HISTOGRAM,
			 .bounds = bounds,
			 .n_bounds = n_bounds,
			 .label = label,
			 .values = values,
			 .n = n};
	family *f;
	kvi_err err = family_add(m, &s, &f);
	if (err != KVI_OK) {
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = &f->histograms[i];
	}
	return KVI_OK;
}

void
kvi_metrics_collector_add(kvi_metrics *m, kvi_metrics_collect_fn fn, void *arg)
{
	collector *c = kvi_calloc(1, sizeof(*c));
	c->fn = fn;
	c->arg = arg;
	pthread_mutex_lock(&m->mu);
	*m->collectors_tail = c;
	m->collectors_tail = &c->next;
	pthread_mutex_unlock(&m->mu);
}

/* ---- handles ---- */

void
kvi_counter_inc(kvi_counter *c)
{
	atomic_fetch_add_explicit(&c->v, 1, memory_order_relaxed);
}

void
kvi_counter_add(kvi_counter *c, uint64_t n)
{
	atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}

uint64_t
kvi_counter_get(const kvi_counter *c)
{
	return atomic_load_explicit(&((kvi_counter *)c)->v,
				    memory_order_relaxed);
}

void
kvi_gauge_set(kvi_gauge *g, int64_t v)
{
	if (g->kind == KVI_GAUGE_DOUBLE) {
		kvi_gauge_set_double(g, (double)v);
		return;
	}
	atomic_store_explicit(&g->v, (uint64_t)v, memory_order_relaxed);
}

void
kvi_gauge_add(kvi_gauge *g, int64_t delta)
{
	if (g->kind == KVI_GAUGE_DOUBLE) {
		kvi_gauge_add_double(g, (double)delta);
		return;
	}
	atomic_fetch_add_explicit(&g->v, (uint64_t)delta, memory_order_relaxed);
}

void
kvi_gauge_set_double(kvi_gauge *g, double v)
{
	if (g->kind == KVI_GAUGE_INT) {
		kvi_gauge_set(g, round_i64(v));
		return;
	}
	atomic_store_explicit(&g->v, double_bits(v), memory_order_relaxed);
}

void
kvi_gauge_add_double(kvi_gauge *g, double delta)
{
	if (g->kind == KVI_GAUGE_INT) {
		kvi_gauge_add(g, round_i64(delta));
		return;
	}
	atomic_add_double(&g->v, delta);
}

int64_t
kvi_gauge_get(const kvi_gauge *g)
{
	uint64_t v =
	    atomic_load_explicit(&((kvi_gauge *)g)->v, memory_order_relaxed);
	if (g->kind == KVI_GAUGE_DOUBLE) {
		return round_i64(bits_double(v));
	}
	return (int64_t)v;
}

double
kvi_gauge_get_double(const kvi_gauge *g)
{
	uint64_t v =
	    atomic_load_explicit(&((kvi_gauge *)g)->v, memory_order_relaxed);
	if (g->kind == KVI_GAUGE_DOUBLE) {
		return bits_double(v);
	}
	return (double)(int64_t)v;
}

void
kvi_histogram_observe(kvi_histogram *h, double v)
{
	if (isnan(v)) {
		return;
	}
	size_t i = 0;
	while (i < h->n_bounds && v > h->bounds[i]) {
		i++;
	}
	atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
	atomic_add_double(&h->sum_bits, v);
}

void
kvi_histogram_snapshot(const kvi_histogram *h, kvi_histogram_snap *out)
{
	uint64_t total = 0;
	out->n_bounds = h->n_bounds;
	for (size_t i = 0; i <= h->n_bounds; i++) {
		if (i < h->n_bounds) {
			out->bounds[i] = h->bounds[i];
		}
		total +=
		    atomic_load_explicit(&h->counts[i], memory_order_relaxed);
		out->buckets[i] = total;
	}
	out->count = total;
	out->sum = bits_double(atomic_load_explicit(
	    &((kvi_histogram *)h)->sum_bits, memory_order_relaxed));
}
