/*
 * backlog.c - the live batches a listener holds while it recovers, or
 * while the ingest is behind: a FIFO per listener, bounded per listener
 * and per shard (--listener-backlog-max-mb, --backlog-max-mb). Past
 * either budget the whole queue is dropped rather than grown: what is
 * dropped becomes a gap that the next repair closes from the watermark,
 * so memory stays bounded and nothing is lost for good.
 */
#include <malloc.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "recovery.h"

/* A burst of queued batches whose memory is worth giving back. */
#define KVQ_GIVE_BACK_BYTES ((size_t)32 << 20)

void
kvq_backlog_clear(kvq_recovery *q, kvl_listener *l)
{
	while (l->backlog != NULL) {
		kvl_pending_msg *m = l->backlog;
		l->backlog = m->next;
		kvi_free(m);
	}
	l->backlog_tail = NULL;
	q->backlog.bytes -= l->backlog_bytes;
	l->backlog_bytes = 0;
	l->backlog_len = 0;
}

void
kvq_backlog_push(kvq_recovery *q, kvl_listener *l, uint64_t seq,
		 const void *payload, size_t len, bool checked)
{
	if (q->backlog.bytes + len > q->cfg.backlog_max_bytes ||
	    l->backlog_bytes + len > q->cfg.listener_backlog_max_bytes) {
		/* What is dropped becomes a gap that the next repair covers,
		 * from the watermark: memory stays bounded, nothing is lost
		 * for good. */
		if (l->c.backlog_overflows++ == 0 || l->backlog_len > 0) {
			kvl_log(l, "backlog_overflow",
				"batches=%zu bytes=%zu shard_bytes=%zu",
				l->backlog_len, l->backlog_bytes,
				q->backlog.bytes);
		}
		kvl_error(l,
			  "%zu live batches (%zu bytes) queued past the "
			  "budget (%zu per listener, %zu per shard): dropped, "
			  "to be repaired from the watermark",
			  l->backlog_len + 1, l->backlog_bytes + len,
			  q->cfg.listener_backlog_max_bytes,
			  q->cfg.backlog_max_bytes);
		kvq_backlog_clear(q, l);
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
	q->backlog.bytes += len;
	if (q->backlog.bytes > q->backlog.peak) {
		q->backlog.peak = q->backlog.bytes;
	}
}

kvl_pending_msg *
kvq_backlog_pop(kvq_recovery *q, kvl_listener *l)
{
	kvl_pending_msg *m = l->backlog;
	if (m != NULL) {
		l->backlog = m->next;
		if (l->backlog == NULL) {
			l->backlog_tail = NULL;
		}
		l->backlog_len--;
		l->backlog_bytes -= m->len;
		q->backlog.bytes -= m->len;
	}
	return m;
}

void
kvq_backlog_unpop(kvq_recovery *q, kvl_listener *l, kvl_pending_msg *m)
{
	m->next = l->backlog;
	l->backlog = m;
	if (l->backlog_tail == NULL) {
		l->backlog_tail = m;
	}
	l->backlog_len++;
	l->backlog_bytes += m->len;
	q->backlog.bytes += m->len;
}

size_t
kvq_backlog_bytes(const kvq_recovery *q)
{
	return q->backlog.bytes;
}

void
kvq_backlog_give_back(kvq_recovery *q)
{
	if (q->backlog.bytes == 0 && q->backlog.peak > KVQ_GIVE_BACK_BYTES) {
		kvi_log(KVI_LOG_INFO, "memory_given_back",
			"backlog_peak_bytes=%zu", q->backlog.peak);
		q->backlog.peak = 0;
		malloc_trim(0);
	}
}
