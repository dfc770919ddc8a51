/*
 * metrics.h - a Prometheus metrics registry: counters, gauges, histograms.
 *
 * A process creates one registry per server (kvi_metrics_alloc), registers
 * its metric families at start-up and keeps the handles registration returns.
 * A family is a name, a help text, a type and either one unlabelled child or
 * a fixed set of children, one per value of a single label given up front
 * (kvindex_recoveries_total{kind="events"|"treedump"|"failed"}). Hot paths
 * only ever touch a handle: a counter increment is one relaxed atomic add, a
 * histogram observation a short scan of its bounds plus two atomic updates.
 * There are no lookups by name and no locks after registration.
 *
 * Values that are cheaper to compute when scraped than to maintain (listeners
 * by state, the LMDB file size, shards up) come from collectors: callbacks
 * that kvi_metrics_render() calls, after the registered families, to append
 * samples through the kvi_metrics_out writer, which formats and escapes them.
 *
 * kvi_metrics_render() writes the Prometheus text exposition format 0.0.4:
 * families in registration order, each with # HELP and # TYPE lines; label
 * values escaped (backslash, double quote, newline); histograms as
 * cumulative _bucket{le="..."} samples ending with le="+Inf", then _sum and
 * _count. Floating-point values are written in their shortest round-trip
 * form ("0.005", "2.5", "1e-06", "+Inf", "NaN"); counters and integer gauges
 * as integers.
 *
 * Consistency: a scrape reads each child without stopping writers, so two
 * samples of one scrape may straddle an update. A histogram's _count is the
 * sum of the buckets read, so it always equals its +Inf bucket; its _sum may
 * be a few observations ahead or behind.
 *
 * Threads and ownership: registration, collector_add and render take the
 * registry's mutex, so they may be called from any thread; collectors run
 * under it and must not call back into the registry. Handles (kvi_counter,
 * kvi_gauge, kvi_histogram) are owned by the registry, stay valid until
 * kvi_metrics_free(), and may be updated from any thread at any time.
 */
#ifndef KVI_COMMON_METRICS_H
#define KVI_COMMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The Content-Type of a rendered registry. */
#define KVI_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The most upper bounds a histogram may have (+Inf not counted). */
#define KVI_HISTOGRAM_MAX_BOUNDS 64

typedef struct kvi_metrics kvi_metrics;
typedef struct kvi_counter kvi_counter;
typedef struct kvi_gauge kvi_gauge;
typedef struct kvi_histogram kvi_histogram;
typedef struct kvi_metrics_out kvi_metrics_out;

typedef enum kvi_metric_type {
	KVI_METRIC_COUNTER = 0,
	KVI_METRIC_GAUGE,
	KVI_METRIC_HISTOGRAM,
	KVI_METRIC_UNTYPED,
} kvi_metric_type;

/* What a gauge holds. Integer operations on a double gauge convert their
 * argument; double operations on an integer gauge round to the nearest
 * integer. */
typedef enum kvi_gauge_kind {
	KVI_GAUGE_INT = 0,
	KVI_GAUGE_DOUBLE,
} kvi_gauge_kind;

/* One label of a sample written by a collector. */
typedef struct kvi_label {
	const char *name;
	const char *value;
} kvi_label;

/* A collector appends samples to out at render time; arg is what
 * kvi_metrics_collector_add() was given. */
typedef void (*kvi_metrics_collect_fn)(void *arg, kvi_metrics_out *out);

/* A histogram read at one instant, for tests and tools. */
typedef struct kvi_histogram_snap {
	size_t n_bounds;
	double bounds[KVI_HISTOGRAM_MAX_BOUNDS];
	/* cumulative counts: buckets[i] observations <= bounds[i];
	 * buckets[n_bounds] is the +Inf bucket and equals count */
	uint64_t buckets[KVI_HISTOGRAM_MAX_BOUNDS + 1];
	uint64_t count;
	double sum;
} kvi_histogram_snap;

/* kvi_metrics_alloc returns an empty registry; it aborts on out-of-memory. */
kvi_metrics *kvi_metrics_alloc(void);

/* kvi_metrics_free frees m, its families and every handle they returned.
 * No thread may use a handle of m any more. NULL is ignored. */
void kvi_metrics_free(kvi_metrics *m);

/*
 * Registration. Each function adds one family and writes its handle(s) to
 * out only on success: one handle for the plain form, n handles for the _vec
 * form, out[i] being the child whose label has values[i]. The strings are
 * copied. Errors:
 *   KVI_EINVAL  a name that is not [a-zA-Z_:][a-zA-Z0-9_:]*, a label name
 *               that is not [a-zA-Z_][a-zA-Z0-9_]* or starts with "__"
 *               (or is "le" for a histogram), n == 0, a repeated label
 *               value, histogram bounds that are not finite and strictly
 *               increasing or more than KVI_HISTOGRAM_MAX_BOUNDS of them
 *   KVI_EEXIST  a family of that name is already registered
 */
kvi_err kvi_metrics_counter_add(kvi_metrics *m, const char *name,
				const char *help, kvi_counter **out);
kvi_err kvi_metrics_counter_vec_add(kvi_metrics *m, const char *name,
				    const char *help, const char *label,
				    const char *const *values, size_t n,
				    kvi_counter **out);
kvi_err kvi_metrics_gauge_add(kvi_metrics *m, const char *name,
			      const char *help, kvi_gauge_kind kind,
			      kvi_gauge **out);
kvi_err kvi_metrics_gauge_vec_add(kvi_metrics *m, const char *name,
				  const char *help, kvi_gauge_kind kind,
				  const char *label, const char *const *values,
				  size_t n, kvi_gauge **out);
/* bounds are the upper bounds of the buckets in seconds (or whatever unit
 * observations use), without +Inf, which is always added. */
kvi_err kvi_metrics_histogram_add(kvi_metrics *m, const char *name,
				  const char *help, const double *bounds,
				  size_t n_bounds, kvi_histogram **out);
kvi_err kvi_metrics_histogram_vec_add(kvi_metrics *m, const char *name,
				      const char *help, const double *bounds,
				      size_t n_bounds, const char *label,
				      const char *const *values, size_t n,
				      kvi_histogram **out);

/* kvi_metrics_collector_add registers fn, called with arg on every render
 * after the families, in the order collectors were added. arg is borrowed
 * and must stay valid until kvi_metrics_free(). */
void kvi_metrics_collector_add(kvi_metrics *m, kvi_metrics_collect_fn fn,
			       void *arg);

/* kvi_metrics_process_add adds the process's own families, read at each
 * render: process_resident_memory_bytes and process_cpu_seconds_total. */
void kvi_metrics_process_add(kvi_metrics *m);

/* kvi_metrics_render returns the text exposition of m as a NUL-terminated
 * string the caller frees with kvi_free(), and writes its length (without
 * the NUL) to *len. */
char *kvi_metrics_render(kvi_metrics *m, size_t *len);

/* Counters: monotonic u64, wrapping at 2^64. */
void kvi_counter_inc(kvi_counter *c);
void kvi_counter_add(kvi_counter *c, uint64_t n);
uint64_t kvi_counter_get(const kvi_counter *c);

/* Gauges. */
void kvi_gauge_set(kvi_gauge *g, int64_t v);
void kvi_gauge_add(kvi_gauge *g, int64_t delta);
void kvi_gauge_set_double(kvi_gauge *g, double v);
void kvi_gauge_add_double(kvi_gauge *g, double delta);
/* kvi_gauge_get returns the value rounded to an integer (for a double
 * gauge); kvi_gauge_get_double returns it as a double. */
int64_t kvi_gauge_get(const kvi_gauge *g);
double kvi_gauge_get_double(const kvi_gauge *g);

/* kvi_histogram_observe counts one observation of v: into the first bucket
 * whose bound is >= v (the +Inf bucket if none) and into the sum. NaN is
 * ignored. */
void kvi_histogram_observe(kvi_histogram *h, double v);

/* kvi_histogram_snapshot reads h into *out. */
void kvi_histogram_snapshot(const kvi_histogram *h, kvi_histogram_snap *out);

/*
 * The collector writer. A collector writes each family's header once, then
 * its samples; every string is escaped as the format requires. A name or a
 * label name that is not valid is a bug: the sample (or header) is left out
 * and logged.
 */

/* kvi_metrics_out_family writes the # HELP and # TYPE lines of a family. */
void kvi_metrics_out_family(kvi_metrics_out *out, const char *name,
			    const char *help, kvi_metric_type type);

/* kvi_metrics_out_sample writes `name{labels} value`; labels may be NULL
 * when n is 0. */
void kvi_metrics_out_sample(kvi_metrics_out *out, const char *name,
			    const kvi_label *labels, size_t n, double value);

/* kvi_metrics_out_sample_i64 does the same for an exact integer value. */
void kvi_metrics_out_sample_i64(kvi_metrics_out *out, const char *name,
				const kvi_label *labels, size_t n,
				int64_t value);

#endif /* KVI_COMMON_METRICS_H */
