/*
 * backlog.c - the live batches a listener holds while it recovers, or
 * while the ingest is behind: a FIFO per listener, bounded per listener
 * and per shard (--listener-backlog-max-mb, --backlog-max-mb). Past
 * either budget the whole queue is dropped rather than grown: what is
 * dropped becomes a gap that the next repair closes from the watermark,
 * so memory stays bounded and nothing is lost for good.
 */
#include <string.h>

#include "alloc.h"
#include "ingest_int.h"
#include "log.h"

void
kvq_backlog_clear(kvg_ingest *g, kvl_listener *l)
{
	while (l->backlog != NULL) {
		kvl_pending_msg *m = l->backlog;
		l->backlog = m->next;
		kvi_free(m);
	}
	l->backlog_tail = NULL;
	g->backlog_bytes -= l->backlog_bytes;
	l->backlog_bytes = 0;
	l->backlog_len = 0;
}

void
kvq_backlog_push(kvg_ingest *g, kvl_listener *l, uint64_t seq,
		 const void *payload, size_t len, bool checked)
{
	if (g->backlog_bytes + len > g->cfg.backlog_max_bytes ||
	    l->backlog_bytes + len > g->cfg.listener_backlog_max_bytes) {
		/* What is dropped becomes a gap that the next repair covers,
		 * from the watermark: memory stays bounded, nothing is lost
		 * for good. */
		if (l->c.backlog_overflows++ == 0 || l->backlog_len > 0) {
			kvl_log(l, "backlog_overflow",
				"batches=%zu bytes=%zu shard_bytes=%zu",
				l->backlog_len, l->backlog_bytes,
				g->backlog_bytes);
		}
		kvl_error(l,
			  "%zu live batches (%zu bytes) queued past the "
			  "budget (%zu per listener, %zu per shard): dropped, "
			  "to be repaired from the watermark",
			  l->backlog_len + 1, l->backlog_bytes + len,
			  g->cfg.listener_backlog_max_bytes,
			  g->cfg.backlog_max_bytes);
		kvq_backlog_clear(g, l);
		return;
	}
	kvl_pending_msg *m = kvi_malloc(sizeof(*m) + len);
	m->next = NULL;
	m->seq = seq;
	m->checked = checked;
	m->len = len;
	memcpy(m->payload, payload, len);
	if (l->backlog_tail != NULL) {
		l->backlog_tail->next = m;
	} else {
		l->backlog = m;
	}
	l->backlog_tail = m;
	l->backlog_len++;
	l->backlog_bytes += len;
	g->backlog_bytes += len;
	if (g->backlog_bytes > g->backlog_peak) {
		g->backlog_peak = g->backlog_bytes;
	}
}

kvl_pending_msg *
kvq_backlog_pop(kvg_ingest *g, kvl_listener *l)
{
	kvl_pending_msg *m = l->backlog;
	if (m != NULL) {
		l->backlog = m->next;
		if (l->backlog == NULL) {
			l->backlog_tail = NULL;
		}
		l->backlog_len--;
		l->backlog_bytes -= m->len;
		g->backlog_bytes -= m->len;
	}
	return m;
}

void
kvq_backlog_unpop(kvg_ingest *g, kvl_listener *l, kvl_pending_msg *m)
{
	m->next = l->backlog;
	l->backlog = m;
	if (l->backlog_tail == NULL) {
		l->backlog_tail = m;
	}
	l->backlog_len++;
	l->backlog_bytes += m->len;
	g->backlog_bytes += m->len;
}
