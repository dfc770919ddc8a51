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

typedef struct kvs_loop kvs_loop; /* service_net.c */
typedef struct kvs_conn kvs_conn; /* service_net.c */

/* A request for a worker: its bytes, copied off the connection, and once
 * answered its reply, which goes back to the connection's loop. */
typedef struct kvs_job {
	struct kvs_job *next;
	kvs_service *svc;
	kvs_loop *loop;
	kvs_conn *conn; /* holds a reference; only its loop touches it */
	uint8_t head[4 * KVI_SP_HOPS_MAX];
	size_t head_len;
	uint8_t *body;
	size_t len;
	nng_msg *reply; /* set by the worker */
} kvs_job;

struct kvs_service {
	kvs_handler handler;
	void *arg;
	unsigned inline_kinds; /* bit per kvs_kind answered on a loop */

	/* the network side (service_net.c) */
	char *url;
	bool ipc;
	char *ipc_path; /* removed when the service stops */
	int listen_fd;  /* -1 until bound; then the listener's */
	int port;
	int n_loops;
	kvs_loop **loops;
	atomic_uint next_loop; /* round robin of accepted connections */

	/* the workers and their queue */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopping;                /* under mu */
	kvs_job *queue, **queue_tail; /* under mu */
	int n_workers, n_started;
	pthread_t *threads;

	_Atomic uint64_t requests[KVS_KIND_COUNT];
	_Atomic uint64_t errors[KVS_KIND_COUNT];
	_Atomic uint64_t handler_us[KVS_KIND_COUNT];
	_Atomic uint64_t malformed;
	_Atomic uint64_t version_mismatches;
	_Atomic uint64_t no_body;
	_Atomic uint64_t bad_responses;
	_Atomic uint64_t send_failures;
};

/* ---- service.c, for service_net.c ---- */

/* kvs_count adds n to a counter. */
void kvs_count(_Atomic uint64_t *counter, uint64_t n);

/* kvs_answer decodes the request body[0..len) into arena and returns its
 * packed reply: an envelope error, or the answer of a kind svc answers
 * inline. Returns NULL when the request needs a worker (kvs_submit). */
nng_msg *kvs_answer(kvs_service *svc, kvp_arena *arena, const uint8_t *body,
		    size_t len);

/* kvs_submit queues job for a worker, which calls kvs_net_done with its
 * reply; while stopping, the job stays queued and is freed unanswered. */
void kvs_submit(kvs_service *svc, kvs_job *job);

/* ---- service_listen.c and service_net.c, for service.c ---- */

/* kvs_net_listen binds and listens on url. Returns KVI_EINVAL for a URL it
 * cannot serve or an address this host does not have, KVI_EIO for one in
 * use; with a message in err. */
kvi_err kvs_net_listen(kvs_service *svc, const char *url, char *err,
		       size_t errlen);

/* kvs_net_start starts n_loops loop threads serving the listener. */
kvi_err kvs_net_start(kvs_service *svc, int n_loops, char *err, size_t errlen);

/* kvs_net_quiet stops accepting connections and reading requests; replies
 * still go out. */
void kvs_net_quiet(kvs_service *svc);

/* kvs_net_stop writes the replies the workers have finished, waits up to a
 * second for them to leave, stops the loops and closes every connection
 * and the listener. */
void kvs_net_stop(kvs_service *svc);

/* kvs_net_done hands job, answered, back to its connection's loop; from a
 * worker thread. */
void kvs_net_done(kvs_job *job);

/* kvs_net_drop frees job unanswered (counted as a reply not sent): on its
 * loop, or once the loops have stopped. */
void kvs_net_drop(kvs_job *job);

#endif /* KVI_SHARD_SERVICE_INT_H */
