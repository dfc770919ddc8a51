#include "fanout.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

typedef struct kvc_fan_arg {
	kvc_fanout *f;
	size_t idx;
} kvc_fan_arg;

void
kvc_fanout_init(kvc_fanout *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
}

static void
fan_done(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	kvc_fan_arg *a = arg;
	kvc_fanout *f = a->f;
	pthread_mutex_lock(&f->mu);
	kvc_call *c = &f->calls[a->idx];
	c->rv = rv;
	c->resp = resp;
	snprintf(c->err, sizeof(c->err), "%s", err);
	if (--f->pending == 0) {
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	kvi_free(a);
}

size_t
kvc_fanout_start(kvc_fanout *f, kvp_client *c, const Kvindex__Request *req,
		 int timeout_ms, void *user)
{
	pthread_mutex_lock(&f->mu);
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 8;
		f->calls =
		    kvi_reallocarray(f->calls, f->cap, sizeof(*f->calls));
	}
	size_t idx = f->n++;
	memset(&f->calls[idx], 0, sizeof(f->calls[idx]));
	f->calls[idx].user = user;
	f->pending++;
	pthread_mutex_unlock(&f->mu);

	kvc_fan_arg *a = kvi_malloc(sizeof(*a));
	a->f = f;
	a->idx = idx;
	kvi_err rv = kvp_call_async(c, req, timeout_ms, fan_done, a);
	if (rv != KVI_OK) {
		char msg[64];
		snprintf(msg, sizeof(msg), "call not sent: %s",
			 kvi_strerror(rv));
		fan_done(a, rv, NULL, msg);
	}
	return idx;
}

void
kvc_fanout_wait(kvc_fanout *f)
{
	pthread_mutex_lock(&f->mu);
	while (f->pending > 0) {
		pthread_cond_wait(&f->cv, &f->mu);
	}
	pthread_mutex_unlock(&f->mu);
}

void
kvc_fanout_fini(kvc_fanout *f)
{
	kvc_fanout_wait(f);
	for (size_t i = 0; i < f->n; i++) {
		if (f->calls[i].resp != NULL) {
			kvindex__response__free_unpacked(f->calls[i].resp,
							 NULL);
		}
	}
	kvi_free(f->calls);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
}
