/*
 * bench_fleet_cpu.c - sampling processes' CPU time for bench_fleet.
 */
#include "bench_fleet_cpu.h"

#include "alloc.h"
#include "bench_query_proc.h"
#include "kvitest.h"

#define BFC_EVERY_MS 10

static void
bfc_take(bfc *c)
{
	if (c->ns == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1024;
		c->s = kvi_reallocarray(c->s, c->cap, sizeof(*c->s));
	}
	bfc_sample *s = &c->s[c->ns];
	for (int i = 0; i < c->n; i++) {
		s->cpu[i] = (double)bq_cpu_ns(c->pids[i]) / 1e9;
	}
	s->t = (double)kvt_now_ms() / 1000.0;
	c->ns++;
}

static void *
bfc_main(void *arg)
{
	bfc *c = arg;
	while (!atomic_load(&c->stop)) {
		bfc_take(c);
		kvt_sleep_ms(BFC_EVERY_MS);
	}
	bfc_take(c);
	return NULL;
}

void
bfc_start(bfc *c, const pid_t *pids, int n)
{
	*c = (bfc){.n = n < BFC_PROCS ? n : BFC_PROCS};
	for (int i = 0; i < c->n; i++) {
		c->pids[i] = pids[i];
	}
	bfc_take(c);
	pthread_create(&c->th, NULL, bfc_main, c);
}

void
bfc_stop(bfc *c)
{
	atomic_store(&c->stop, 1);
	pthread_join(c->th, NULL);
}

static double
bfc_cpu(const bfc_sample *s, int n, int i)
{
	if (i >= 0) {
		return s->cpu[i];
	}
	double sum = 0;
	for (int k = 0; k < n; k++) {
		sum += s->cpu[k];
	}
	return sum;
}

double
bfc_at(const bfc *c, int i, double t)
{
	if (c->ns == 0) {
		return 0;
	}
	size_t lo = 0, hi = c->ns - 1;
	if (t <= c->s[lo].t) {
		return bfc_cpu(&c->s[lo], c->n, i);
	}
	if (t >= c->s[hi].t) {
		return bfc_cpu(&c->s[hi], c->n, i);
	}
	while (hi - lo > 1) { /* s[lo].t < t < s[hi].t */
		size_t mid = lo + (hi - lo) / 2;
		if (c->s[mid].t <= t) {
			lo = mid;
		} else {
			hi = mid;
		}
	}
	double a = bfc_cpu(&c->s[lo], c->n, i), b = bfc_cpu(&c->s[hi], c->n, i);
	double span = c->s[hi].t - c->s[lo].t;
	return span > 0 ? a + (b - a) * (t - c->s[lo].t) / span : a;
}

void
bfc_free(bfc *c)
{
	kvi_free(c->s);
	c->s = NULL;
	c->ns = c->cap = 0;
}
