/*
 * qbatch.h - the queries bound for one shard, coalesced into messages.
 *
 * Each shard has one kvc_qbatch. A query is sent at once when fewer than
 * max_inflight messages to the shard are in flight; otherwise it waits in
 * a queue, and when a message's reply arrives, everything queued (up to
 * max_batch queries) leaves together as the next message, a
 * QueryBatchRequest. At one query at a time nothing waits and nothing is
 * added to a query's latency; under load the cost of a message - its
 * packing, its system calls, the wake-ups of the threads on both sides,
 * the shard's envelope - is shared by the queries it carries, so the
 * rate a shard can answer grows with the load instead of collapsing.
 * The same scheme as a group commit: batching only what waits anyway.
 *
 * Deadlines. Every query carries its own deadline. A message is sent with
 * the earliest deadline of its queries as its timeout, so no query waits
 * for its answer past its deadline; a query whose deadline has passed
 * while it was queued is failed with KVI_ETIMEDOUT without being sent.
 * A query queued behind a message to a stalled shard therefore waits at
 * most for that message's deadline (which is earlier than its own), is
 * then sent, and is answered or failed by its own deadline.
 *
 * Threading and lifetime. kvc_qbatch_submit may be called from any
 * thread; replies arrive on nng threads. Each item's done callback is
 * called exactly once, on the submitting thread (a query that could not
 * be sent) or on an nng thread, and the batcher never touches itself
 * after it has called the last callback of a reply: whoever submitted the
 * items keeps the batcher (its shard) alive until their callbacks have
 * run, and may then free it. Callbacks run on nng threads and must not
 * block for long.
 */
#ifndef KVI_COORDINATOR_QBATCH_H
#define KVI_COORDINATOR_QBATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "rpc.h"

/* Messages in flight to one shard before queries wait to be coalesced. */
#define KVC_QBATCH_INFLIGHT 2
/* The most queries in one message. */
#define KVC_QBATCH_MAX 64

/* kvc_qbatch_done reports one query's outcome at one shard: rv KVI_OK
 * with the shard's answer qr (valid only during the call), or an error
 * with qr NULL and err saying why. */
typedef void (*kvc_qbatch_done)(void *arg, kvi_err rv,
				const Kvindex__QueryResponse *qr,
				const char *err);

/* One query for one shard; the caller's memory, untouched by the caller
 * from submit until its done callback. */
typedef struct kvc_qbatch_item {
	const Kvindex__QueryRequest *query; /* valid until done */
	int64_t deadline_ms;                /* on kvi_now_ms()'s clock */
	kvc_qbatch_done done;
	void *arg;
	/* the batcher's */
	struct kvc_qbatch_item *next;
	kvi_err failed; /* why it is failed without an answer */
} kvc_qbatch_item;

typedef struct kvc_qbatch kvc_qbatch;

/* kvc_qbatch_alloc returns a batcher sending to client (borrowed; it must
 * outlive the batcher). max_inflight and max_batch of 0 take the
 * defaults above. */
kvc_qbatch *kvc_qbatch_alloc(kvp_client *client, int max_inflight,
			     size_t max_batch);

/* kvc_qbatch_send_fn sends one message the way kvp_call_async does: on
 * KVI_OK, done(arg, ...) runs exactly once, later or on another thread;
 * on an error nothing was sent and done is never called. */
typedef kvi_err (*kvc_qbatch_send_fn)(void *ctx, const Kvindex__Request *req,
				      int timeout_ms, kvp_call_done done,
				      void *arg);

/* kvc_qbatch_alloc_via returns a batcher whose messages go through send
 * (ctx, and url for messages, borrowed: they must outlive it). */
kvc_qbatch *kvc_qbatch_alloc_via(kvc_qbatch_send_fn send, void *ctx,
				 const char *url, int max_inflight,
				 size_t max_batch);

/* kvc_qbatch_free frees b, which must be idle: every item submitted has
 * had its callback (closing the client first ensures it). NULL is a
 * no-op. */
void kvc_qbatch_free(kvc_qbatch *b);

/* kvc_qbatch_idle says whether b has nothing in flight and nothing
 * queued. */
bool kvc_qbatch_idle(kvc_qbatch *b);

/* kvc_qbatch_submit sends it, or queues it to go with the next message. */
void kvc_qbatch_submit(kvc_qbatch *b, kvc_qbatch_item *it);

#endif /* KVI_COORDINATOR_QBATCH_H */
