/*
 * metrics_text.c - the Prometheus text exposition of a registry
 * (metrics.h): the output buffer and its escaping, rendering of the
 * registered families and the writer collectors append samples with.
 */
#include "metrics.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "metrics_int.h"

struct kvi_metrics_out {
	char *p;
	size_t len;
	size_t cap;
};

/* ---- output buffer ---- */

static void
out_reserve(kvi_metrics_out *o, size_t more)
{
	if (o->len + more + 1 <= o->cap) {
		return;
	}
	size_t cap = o->cap ? o->cap : 256;
	while (cap < o->len + more + 1) {
		cap *= 2;
	}
	o->p = kvi_realloc(o->p, cap);
	o->cap = cap;
}

static void
out_mem(kvi_metrics_out *o, const char *s, size_t n)
{
	out_reserve(o, n);
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void
out_str(kvi_metrics_out *o, const char *s)
{
	out_mem(o, s, strlen(s));
}

static void
out_char(kvi_metrics_out *o, char c)
{
	out_mem(o, &c, 1);
}

/* out_escaped writes s with backslash and newline escaped, and double
 * quotes too when quotes is set (label values; HELP text keeps them). */
static void
out_escaped(kvi_metrics_out *o, const char *s, bool quotes)
{
	const char *run = s;
	for (const char *p = s;; p++) {
		const char *esc = NULL;
		if (*p == '\\') {
			esc = "\\\\";
		} else if (*p == '\n') {
			esc = "\\n";
		} else if (*p == '"' && quotes) {
			esc = "\\\"";
		} else if (*p != '\0') {
			continue;
		}
		out_mem(o, run, (size_t)(p - run));
		if (esc == NULL) {
			return;
		}
		out_str(o, esc);
		run = p + 1;
	}
}

/* format_double writes v in the shortest form that reads back as v. */
static void
format_double(char *buf, size_t size, double v)
{
	if (isnan(v)) {
		snprintf(buf, size, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v) {
			return;
		}
	}
}

static void
out_double(kvi_metrics_out *o, double v)
{
	char buf[40];
	format_double(buf, sizeof(buf), v);
	out_str(o, buf);
}

static void
out_u64(kvi_metrics_out *o, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	out_str(o, buf);
}

static void
out_i64(kvi_metrics_out *o, int64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	out_str(o, buf);
}

static void
out_header(kvi_metrics_out *o, const char *name, const char *help,
	   kvi_metric_type type)
{
	static const char *const type_names[] = {
	    [KVI_METRIC_COUNTER] = "counter",
	    [KVI_METRIC_GAUGE] = "gauge",
	    [KVI_METRIC_HISTOGRAM] = "histogram",
	    [KVI_METRIC_UNTYPED] = "untyped",
	};
	out_str(o, "# HELP ");
	out_str(o, name);
	out_char(o, ' ');
	out_escaped(o, help ? help : "", false);
	out_str(o, "\n# TYPE ");
	out_str(o, name);
	out_char(o, ' ');
	out_str(o, type_names[type]);
	out_char(o, '\n');
}

/* out_series writes `name suffix{labels,le="le"} ` up to the value. */
static void
out_series(kvi_metrics_out *o, const char *name, const char *suffix,
	   const kvi_label *labels, size_t n, const char *le)
{
	out_str(o, name);
	out_str(o, suffix);
	if (n > 0 || le != NULL) {
		out_char(o, '{');
		for (size_t i = 0; i < n; i++) {
			if (i > 0) {
				out_char(o, ',');
			}
			out_str(o, labels[i].name);
			out_str(o, "=\"");
			out_escaped(o, labels[i].value ? labels[i].value : "",
				    true);
			out_char(o, '"');
		}
		if (le != NULL) {
			out_str(o, n > 0 ? ",le=\"" : "le=\"");
			out_str(o, le);
			out_char(o, '"');
		}
		out_char(o, '}');
	}
	out_char(o, ' ');
}

/* ---- rendering ---- */

static void
family_label(const family *f, size_t i, kvi_label *l, size_t *n)
{
	*n = 0;
	if (f->label != NULL) {
		l->name = f->label;
		l->value = f->values[i];
		*n = 1;
	}
}

static void
render_histogram(kvi_metrics_out *o, const family *f, size_t i,
		 const kvi_label *l, size_t nl)
{
	kvi_histogram_snap snap;
	kvi_histogram_snapshot(&f->histograms[i], &snap);
	char le[40];
	for (size_t b = 0; b <= snap.n_bounds; b++) {
		if (b < snap.n_bounds) {
			format_double(le, sizeof(le), snap.bounds[b]);
		} else {
			snprintf(le, sizeof(le), "+Inf");
		}
		out_series(o, f->name, "_bucket", l, nl, le);
		out_u64(o, snap.buckets[b]);
		out_char(o, '\n');
	}
	out_series(o, f->name, "_sum", l, nl, NULL);
	out_double(o, snap.sum);
	out_char(o, '\n');
	out_series(o, f->name, "_count", l, nl, NULL);
	out_u64(o, snap.count);
	out_char(o, '\n');
}

static void
render_family(kvi_metrics_out *o, const family *f)
{
	out_header(o, f->name, f->help, f->type);
	for (size_t i = 0; i < f->n; i++) {
		kvi_label l;
		size_t nl;
		family_label(f, i, &l, &nl);
		switch (f->type) {
		case KVI_METRIC_COUNTER:
			out_series(o, f->name, "", &l, nl, NULL);
			out_u64(o, kvi_counter_get(&f->counters[i]));
			out_char(o, '\n');
			break;
		case KVI_METRIC_GAUGE:
			out_series(o, f->name, "", &l, nl, NULL);
			if (f->gauges[i].kind == KVI_GAUGE_DOUBLE) {
				out_double(o,
					   kvi_gauge_get_double(&f->gauges[i]));
			} else {
				out_i64(o, kvi_gauge_get(&f->gauges[i]));
			}
			out_char(o, '\n');
			break;
		case KVI_METRIC_HISTOGRAM:
			render_histogram(o, f, i, &l, nl);
			break;
		case KVI_METRIC_UNTYPED:
			break;
		}
	}
}

char *
kvi_metrics_render(kvi_metrics *m, size_t *len)
{
	kvi_metrics_out o = {0};
	pthread_mutex_lock(&m->mu);
	out_reserve(&o, m->last_len + m->last_len / 8);
	o.p[0] = '\0';
	for (const family *f = m->families; f != NULL; f = f->next) {
		render_family(&o, f);
	}
	for (const collector *c = m->collectors; c != NULL; c = c->next) {
		c->fn(c->arg, &o);
	}
	m->last_len = o.len;
	pthread_mutex_unlock(&m->mu);
	*len = o.len;
	return o.p;
}

/* ---- collector writer ---- */

static bool
labels_valid(const kvi_label *labels, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!kvi_metrics_label_name_valid(labels[i].name)) {
			return false;
		}
	}
	return true;
}

void
kvi_metrics_out_family(kvi_metrics_out *out, const char *name, const char *help,
		       kvi_metric_type type)
{
	if (!kvi_metrics_name_valid(name) || type < KVI_METRIC_COUNTER ||
	    type > KVI_METRIC_UNTYPED) {
		KVI_WARN("metrics_bad_family", "type=%d", (int)type);
		return;
	}
	out_header(out, name, help, type);
}

static bool
sample_begin(kvi_metrics_out *out, const char *name, const kvi_label *labels,
	     size_t n)
{
	if (!kvi_metrics_name_valid(name) || !labels_valid(labels, n)) {
		KVI_WARN("metrics_bad_sample", "labels=%zu", n);
		return false;
	}
	out_series(out, name, "", labels, n, NULL);
	return true;
}

void
kvi_metrics_out_sample(kvi_metrics_out *out, const char *name,
		       const kvi_label *labels, size_t n, double value)
{
	if (sample_begin(out, name, labels, n)) {
		out_double(out, value);
		out_char(out, '\n');
	}
}

void
kvi_metrics_out_sample_i64(kvi_metrics_out *out, const char *name,
			   const kvi_label *labels, size_t n, int64_t value)
{
	if (sample_begin(out, name, labels, n)) {
		out_i64(out, value);
		out_char(out, '\n');
	}
}

/* ---- the process ---- */

/* process_metrics writes the resident memory and CPU time of the process,
 * read from /proc/self at each scrape, under the names Prometheus's own
 * clients give them. */
static void
process_metrics(void *arg, kvi_metrics_out *out)
{
	(void)arg;
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2) {
			rss = 0;
		}
		fclose(f);
	}
	kvi_metrics_out_family(out, "process_resident_memory_bytes",
			       "Resident memory of the process, in bytes.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample_i64(out, "process_resident_memory_bytes", NULL,
				   0, (int64_t)rss * sysconf(_SC_PAGESIZE));
	struct rusage ru;
	double cpu = 0;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	}
	kvi_metrics_out_family(out, "process_cpu_seconds_total",
			       "User and system CPU time of the process, in "
			       "seconds.",
			       KVI_METRIC_COUNTER);
	kvi_metrics_out_sample(out, "process_cpu_seconds_total", NULL, 0, cpu);
}

void
kvi_metrics_process_add(kvi_metrics *m)
{
	kvi_metrics_collector_add(m, process_metrics, NULL);
}
