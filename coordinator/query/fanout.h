/*
 * fanout.h - one request to several shards at once, waited for together.
 *
 * The assigner's calls (status polls, the assignments of a pod's ranks,
 * unassignments) go out in parallel through kvp_call_async and are
 * awaited as a group: kvc_fanout_wait() returns once every call has
 * completed, which kvp_call_async bounds by its timeout, so a group never
 * outlives its deadline by more than nng's completion latency.
 *
 * The HTTP query path does not use this (it must not block a loop
 * thread); it has its own callback-driven fan-out in query.c.
 *
 * Threading: one thread starts the calls and waits; the completions run on
 * nng threads and only touch their own slot and the shared counter.
 */
#ifndef KVI_COORDINATOR_FANOUT_H
#define KVI_COORDINATOR_FANOUT_H

#include <pthread.h>
#include <stddef.h>

#include "error.h"
#include "rpc.h"

/* The outcome of one call. */
typedef struct kvc_call {
	kvi_err rv;
	Kvindex__Response *resp; /* owned by the group; NULL unless valid */
	char err[200];
	void *user; /* the caller's tag */
} kvc_call;

typedef struct kvc_fanout {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t pending;
	kvc_call *calls;
	size_t n, cap;
} kvc_fanout;

void kvc_fanout_init(kvc_fanout *f);

/* kvc_fanout_start sends req to c (timeout_ms) as the group's next call,
 * tagged with user, and returns its index. A call that cannot start is
 * recorded as failed at once. */
size_t kvc_fanout_start(kvc_fanout *f, kvp_client *c,
			const Kvindex__Request *req, int timeout_ms,
			void *user);

/* kvc_fanout_wait blocks until every call started has completed. */
void kvc_fanout_wait(kvc_fanout *f);

/* kvc_fanout_fini waits, then frees the responses and the calls. */
void kvc_fanout_fini(kvc_fanout *f);

#endif /* KVI_COORDINATOR_FANOUT_H */
