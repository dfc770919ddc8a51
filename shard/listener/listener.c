/*
 * listener.c - what a listener does for itself (listener.h): says why it
 * failed, logs a line about itself, and joins its ingest's queue of
 * listeners with ops to commit.
 */
#include "listener.h"

#include <stdarg.h>
#include <stdio.h>

#include "alloc.h"
#include "log.h"

void
kvl_touch(kvl_listener *l)
{
	if (l->dirty) {
		return;
	}
	l->dirty = true;
	kvl_dirtyq *q = l->dirtyq;
	if (q == NULL) {
		return; /* not an ingest's: nothing commits it */
	}
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->lids = kvi_reallocarray(q->lids, q->cap, sizeof(*q->lids));
	}
	q->lids[q->n++] = l->lid;
}

void
kvl_error(kvl_listener *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->last_error, sizeof(l->last_error), fmt, ap);
	va_end(ap);
}

void
kvl_log(kvl_listener *l, const char *event, const char *fmt, ...)
{
	if (!kvi_log_enabled(KVI_LOG_INFO)) {
		return;
	}
	char rest[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	kvi_log(KVI_LOG_INFO, event, "listener=%s %s", l->key, rest);
}

void
kvl_warn(kvl_listener *l, const char *event, const char *fmt, ...)
{
	char rest[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	kvi_log(KVI_LOG_WARN, event, "listener=%s %s", l->key, rest);
}
