/*
 * metrics_int.h - the metrics registry's internals, private to metrics.c
 * (registration, the registry and the handles) and metrics_text.c (the text
 * exposition: rendering a registry and the collector writer). Not a public
 * header; metrics.h says what the registry does and who owns what.
 */
#ifndef KVI_COMMON_METRICS_INT_H
#define KVI_COMMON_METRICS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

struct kvi_counter {
	_Atomic uint64_t v;
};

/* An integer gauge keeps its int64 as two's complement in v, so that adds
 * are one fetch_add; a double gauge keeps the IEEE-754 bits. */
struct kvi_gauge {
	_Atomic uint64_t v;
	kvi_gauge_kind kind;
};

/* counts[i] is the number of observations that fell in bucket i alone;
 * render and snapshot accumulate them. */
struct kvi_histogram {
	const double *bounds; /* the family's */
	size_t n_bounds;
	_Atomic uint64_t *counts; /* n_bounds + 1 */
	_Atomic uint64_t sum_bits;
};

typedef struct family {
	struct family *next;
	char *name;
	char *help;
	kvi_metric_type type;
	char *label;   /* NULL: one unlabelled child */
	char **values; /* n of them when label is set */
	size_t n;      /* children */
	double *bounds;
	size_t n_bounds;
	kvi_counter *counters;
	kvi_gauge *gauges;
	kvi_histogram *histograms;
} family;

typedef struct collector {
	struct collector *next;
	kvi_metrics_collect_fn fn;
	void *arg;
} collector;

struct kvi_metrics {
	pthread_mutex_t mu;
	family *families;
	family **families_tail;
	collector *collectors;
	collector **collectors_tail;
	size_t last_len; /* the previous render's size, to allocate once */
};

/* metrics.c */
/* kvi_metrics_name_valid says whether s is a metric name,
 * [a-zA-Z_:][a-zA-Z0-9_:]*; kvi_metrics_label_name_valid whether it is a
 * label name, [a-zA-Z_][a-zA-Z0-9_]* not starting with "__". */
bool kvi_metrics_name_valid(const char *s);
bool kvi_metrics_label_name_valid(const char *s);

#endif /* KVI_COMMON_METRICS_INT_H */
