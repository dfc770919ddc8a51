/*
 * service_int.h - the request server's internals, private to service.c (the
 * envelope, the workers, start, stop and the counters), service_listen.c
 * (the listening socket) and service_net.c (the loops: accepting, the
 * connections, nng's framing and the replies). Not a public header;
 * service.h says what the server does.
 */
#ifndef KVI_SHARD_SERVICE_INT_H
#define KVI_SHARD_SERVICE_INT_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service.h"
#include "sp.h"

typedef struct kvn_loop kvn_loop; /* service_net.c */
typedef struct kvn_conn kvn_conn; /* service_net.c */

/* A request for a worker: its bytes, copied off the connection, and once
 * answered its reply, which goes back to the connection's loop. */
typedef struct kvn_job {
	struct kvn_job *next;
	kvn_service *svc;
	kvn_loop *loop;
	kvn_conn *conn; /* holds a reference; only its loop touches it */
	uint8_t head[4 * KVI_SP_HOPS_MAX];
	size_t head_len;
	uint8_t *body;
	size_t len;
	nng_msg *reply; /* set by the worker */
} kvn_job;

struct kvn_service {
	kvn_handler handler;
	void *arg;
	unsigned inline_kinds; /* bit per kvn_kind answered on a loop */

	/* the network side (service_net.c) */
	char *url;
	bool ipc;
	char *ipc_path; /* removed when the service stops */
	int listen_fd;  /* -1 until bound; then the listener's */
	int port;
	int n_loops;
	kvn_loop **loops;
	atomic_uint next_loop; /* round robin of accepted connections */

	/* the workers and their queue */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopping;                /* under mu */
	kvn_job *queue, **queue_tail; /* under mu */
	int n_workers, n_started;
	pthread_t *threads;

	_Atomic uint64_t requests[KVN_KIND_COUNT];
	_Atomic uint64_t errors[KVN_KIND_COUNT];
	_Atomic uint64_t handler_us[KVN_KIND_COUNT];
	_Atomic uint64_t malformed;
	_Atomic uint64_t version_mismatches;
	_Atomic uint64_t no_body;
	_Atomic uint64_t bad_responses;
	_Atomic uint64_t send_failures;
};

/* ---- service.c, for service_net.c ---- */

/* kvn_count adds n to a counter. */
void kvn_count(_Atomic uint64_t *counter, uint64_t n);

/* kvn_answer decodes the request body[0..len) into arena and returns its
 * packed reply: an envelope error, or the answer of a kind svc answers
 * inline. Returns NULL when the request needs a worker (kvn_submit). */
nng_msg *kvn_answer(kvn_service *svc, kvp_arena *arena, const uint8_t *body,
		    size_t len);

/* kvn_submit queues job for a worker, which calls kvn_net_done with its
 * reply; while stopping, the job stays queued and is freed unanswered. */
void kvn_submit(kvn_service *svc, kvn_job *job);

/* ---- service_listen.c and service_net.c, for service.c ---- */

/* kvn_net_listen binds and listens on url. Returns KVI_EINVAL for a URL it
 * cannot serve or an address this host does not have, KVI_EIO for one in
 * use; with a message in err. */
kvi_err kvn_net_listen(kvn_service *svc, const char *url, char *err,
		       size_t errlen);

/* kvn_net_start starts n_loops loop threads serving the listener. */
kvi_err kvn_net_start(kvn_service *svc, int n_loops, char *err, size_t errlen);

/* kvn_net_quiet stops accepting connections and reading requests; replies
 * still go out. */
void kvn_net_quiet(kvn_service *svc);

/* kvn_net_stop writes the replies the workers have finished, waits up to a
 * second for them to leave, stops the loops and closes every connection
 * and the listener. */
void kvn_net_stop(kvn_service *svc);

/* kvn_net_done hands job, answered, back to its connection's loop; from a
 * worker thread. */
void kvn_net_done(kvn_job *job);

/* kvn_net_drop frees job unanswered (counted as a reply not sent): on its
 * loop, or once the loops have stopped. */
void kvn_net_drop(kvn_job *job);

#endif /* KVI_SHARD_SERVICE_INT_H */
