#include "service.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "alloc.h"
#include "log.h"
#include "rpc.h"

/* How long a worker waits to hand a reply to its connection. rep0 queues a
 * reply behind earlier ones on the same connection, and a peer that stopped
 * reading must not hold a worker forever. */
#define KVS_SEND_TIMEOUT_MS 5000

typedef struct kvs_worker {
	kvs_service *svc;
	nng_ctx ctx;
	nng_aio *aio; /* no callback: the worker waits on it */
	pthread_t thread;
	bool started;
	bool receiving; /* waiting for a request; under svc->mu */
	kvp_arena arena;
} kvs_worker;

struct kvs_service {
	nng_socket sock;
	bool sock_open;
	nng_listener listener;
	bool listening;
	int port;
	kvs_handler handler;
	void *arg;
	pthread_mutex_t mu;
	bool stopping; /* under mu */
	int n_workers;
	kvs_worker *workers;

	_Atomic uint64_t requests[KVS_KIND_COUNT];
	_Atomic uint64_t errors[KVS_KIND_COUNT];
	_Atomic uint64_t handler_us[KVS_KIND_COUNT];
	_Atomic uint64_t malformed;
	_Atomic uint64_t version_mismatches;
	_Atomic uint64_t no_body;
	_Atomic uint64_t bad_responses;
	_Atomic uint64_t send_failures;
};

static const char *const kvs_kind_names[KVS_KIND_COUNT] = {
    [KVS_KIND_ASSIGN] = "assign", [KVS_KIND_UNASSIGN] = "unassign",
    [KVS_KIND_QUERY] = "query",   [KVS_KIND_STATUS] = "status",
    [KVS_KIND_DUMP] = "dump",
};

const char *
kvs_kind_name(kvs_kind kind)
{
	if ((unsigned)kind >= KVS_KIND_COUNT) {
		return "unknown";
	}
	return kvs_kind_names[kind];
}

static void
kvs_count(_Atomic uint64_t *counter, uint64_t n)
{
	atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

static uint64_t
kvs_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* kvs_kind_of finds the kind of req's body. Returns false when it has none
 * this build knows. */
static bool
kvs_kind_of(const Kvindex__Request *req, kvs_kind *out)
{
	switch (req->body_case) {
	case KVINDEX__REQUEST__BODY_ASSIGN:
		*out = KVS_KIND_ASSIGN;
		return req->assign != NULL;
	case KVINDEX__REQUEST__BODY_UNASSIGN:
		*out = KVS_KIND_UNASSIGN;
		return req->unassign != NULL;
	case KVINDEX__REQUEST__BODY_QUERY:
		*out = KVS_KIND_QUERY;
		return req->query != NULL;
	case KVINDEX__REQUEST__BODY_STATUS:
		*out = KVS_KIND_STATUS;
		return req->status != NULL;
	case KVINDEX__REQUEST__BODY_DUMP:
		*out = KVS_KIND_DUMP;
		return req->dump != NULL;
	default:
		return false;
	}
}

/* kvs_reply_error returns a packed response with code and message and no
 * body. */
static nng_msg *
kvs_reply_error(kvi_err code, const char *message)
{
	Kvindex__Response resp = KVINDEX__RESPONSE__INIT;
	resp.version = KVP_VERSION;
	resp.code = code;
	resp.error = (char *)message;
	nng_msg *reply = NULL;
	/* Cannot fail: every field is set and the message is small. */
	kvp_response_pack(&resp, &reply, NULL, 0);
	return reply;
}

/* kvs_service_handle runs the handler on a decoded request and returns the
 * packed reply. */
static nng_msg *
kvs_service_handle(kvs_service *svc, kvs_worker *w, const Kvindex__Request *req,
		   kvs_kind kind)
{
	Kvindex__Response resp = KVINDEX__RESPONSE__INIT;
	uint64_t t0 = kvs_now_us();
	svc->handler(svc->arg, req, &resp, &w->arena);
	kvs_count(&svc->handler_us[kind], kvs_now_us() - t0);
	kvs_count(&svc->requests[kind], 1);

	resp.version = KVP_VERSION;
	if (resp.code != KVI_OK && resp.error == NULL) {
		resp.error = (char *)kvi_strerror((kvi_err)resp.code);
	}
	nng_msg *reply;
	char err[256];
	kvi_err rv = kvp_response_pack(&resp, &reply, err, sizeof(err));
	if (rv != KVI_OK) {
		char q[300];
		KVI_WARN("rpc_bad_response", "kind=%s error=%s",
			 kvs_kind_name(kind), kvi_log_quote(q, sizeof(q), err));
		kvs_count(&svc->bad_responses, 1);
		kvs_count(&svc->errors[kind], 1);
		rv = rv == KVI_ETOOBIG ? KVI_ETOOBIG : KVI_EINTERNAL;
		return kvs_reply_error(rv, err);
	}
	if (resp.code != KVI_OK) {
		kvs_count(&svc->errors[kind], 1);
	}
	return reply;
}

/* kvs_service_answer decodes the request msg and returns the packed reply:
 * the handler's, or an envelope error. */
static nng_msg *
kvs_service_answer(kvs_service *svc, kvs_worker *w, nng_msg *msg)
{
	ProtobufCAllocator alloc;
	kvp_arena_allocator(&w->arena, &alloc);
	Kvindex__Request *req;
	char err[256];
	kvi_err rv = kvp_request_unpack(nng_msg_body(msg), nng_msg_len(msg),
					&alloc, &req, err, sizeof(err));
	if (rv == KVI_EVERSION) {
		kvs_count(&svc->version_mismatches, 1);
		return kvs_reply_error(rv, err);
	}
	if (rv != KVI_OK) {
		kvs_count(&svc->malformed, 1);
		return kvs_reply_error(KVI_EPROTO, err);
	}
	kvs_kind kind;
	if (!kvs_kind_of(req, &kind)) {
		kvs_count(&svc->no_body, 1);
		return kvs_reply_error(KVI_EINVAL,
				       "request has no body this shard knows");
	}
	return kvs_service_handle(svc, w, req, kind);
}

/* kvs_worker_recv waits for the next request into *out. Returns false when
 * the service is stopping. */
static bool
kvs_worker_recv(kvs_worker *w, nng_msg **out)
{
	kvs_service *svc = w->svc;
	for (;;) {
		/* Posting the receive under mu lets kvs_service_stop cancel
		 * exactly the workers that wait for a request. */
		pthread_mutex_lock(&svc->mu);
		if (svc->stopping) {
			pthread_mutex_unlock(&svc->mu);
			return false;
		}
		w->receiving = true;
		nng_aio_set_timeout(w->aio, NNG_DURATION_INFINITE);
		nng_ctx_recv(w->ctx, w->aio);
		pthread_mutex_unlock(&svc->mu);

		nng_aio_wait(w->aio);
		pthread_mutex_lock(&svc->mu);
		w->receiving = false;
		pthread_mutex_unlock(&svc->mu);

		int nrv = nng_aio_result(w->aio);
		if (nrv == 0) {
			*out = nng_aio_get_msg(w->aio);
			return true;
		}
		if (nrv == NNG_ECLOSED || nrv == NNG_ECANCELED) {
			return false;
		}
		KVI_WARN("rpc_recv_failed", "error=\"%s\"", nng_strerror(nrv));
	}
}

/* kvs_worker_send hands reply to the connection its request came from. */
static void
kvs_worker_send(kvs_worker *w, nng_msg *reply)
{
	nng_aio_set_msg(w->aio, reply);
	nng_aio_set_timeout(w->aio, KVS_SEND_TIMEOUT_MS);
	nng_ctx_send(w->ctx, w->aio);
	nng_aio_wait(w->aio);
	if (nng_aio_result(w->aio) != 0) {
		/* The reply is still ours; the requester is gone or stuck. */
		nng_msg *msg = nng_aio_get_msg(w->aio);
		if (msg != NULL) {
			nng_msg_free(msg);
		}
		kvs_count(&w->svc->send_failures, 1);
	}
}

static void *
kvs_worker_main(void *arg)
{
	kvs_worker *w = arg;
	nng_msg *msg;
	while (kvs_worker_recv(w, &msg)) {
		nng_msg *reply = kvs_service_answer(w->svc, w, msg);
		nng_msg_free(msg);
		kvs_worker_send(w, reply);
		kvp_arena_reset(&w->arena);
	}
	return NULL;
}

/* kvs_service_listen opens the socket and listens on url. */
static kvi_err
kvs_service_listen(kvs_service *svc, const char *url, char *err, size_t errlen)
{
	int nrv = nng_rep0_open(&svc->sock);
	if (nrv != 0) {
		kvi_msgf(err, errlen, "rep socket: %s", nng_strerror(nrv));
		return kvp_err_from_nng(nrv);
	}
	svc->sock_open = true;
	if ((nrv = nng_socket_set_size(svc->sock, NNG_OPT_RECVMAXSZ,
				       KVP_MSG_MAX)) != 0) {
		kvi_msgf(err, errlen, "rep socket: %s", nng_strerror(nrv));
		return kvp_err_from_nng(nrv);
	}
	if ((nrv = nng_listener_create(&svc->listener, svc->sock, url)) != 0) {
		kvi_msgf(err, errlen, "listen on %s: %s", url,
			 nng_strerror(nrv));
		return KVI_EINVAL;
	}
	svc->listening = true;
	if ((nrv = nng_listener_start(svc->listener, 0)) != 0) {
		kvi_msgf(err, errlen, "listen on %s: %s", url,
			 nng_strerror(nrv));
		kvi_err rv = kvp_err_from_nng(nrv);
		return rv == KVI_EINVAL ? KVI_EINVAL : KVI_EIO;
	}
	if (nng_listener_get_int(svc->listener, NNG_OPT_TCP_BOUND_PORT,
				 &svc->port) != 0) {
		svc->port = 0;
	}
	return KVI_OK;
}

/* kvs_service_spawn gives every worker its context and thread. */
static kvi_err
kvs_service_spawn(kvs_service *svc, char *err, size_t errlen)
{
	for (int i = 0; i < svc->n_workers; i++) {
		kvs_worker *w = &svc->workers[i];
		int nrv = nng_aio_alloc(&w->aio, NULL, NULL);
		if (nrv != 0) {
			kvi_oom(sizeof(nng_aio *));
		}
		if ((nrv = nng_ctx_open(&w->ctx, svc->sock)) != 0) {
			kvi_msgf(err, errlen, "rep context: %s",
				 nng_strerror(nrv));
			return kvp_err_from_nng(nrv);
		}
		if (pthread_create(&w->thread, NULL, kvs_worker_main, w) != 0) {
			kvi_msgf(err, errlen, "cannot start worker thread %d",
				 i);
			return KVI_EIO;
		}
		w->started = true;
	}
	return KVI_OK;
}

kvi_err
kvs_service_start(const char *url, int workers, kvs_handler handler, void *arg,
		  kvs_service **out, char *err, size_t errlen)
{
	if (url == NULL || handler == NULL || out == NULL || workers < 1 ||
	    workers > KVS_WORKERS_MAX) {
		kvi_msgf(err, errlen, "invalid service arguments (workers %d)",
			 workers);
		return KVI_EINVAL;
	}
	kvs_service *svc = kvi_calloc(1, sizeof(*svc));
	svc->handler = handler;
	svc->arg = arg;
	pthread_mutex_init(&svc->mu, NULL);
	svc->n_workers = workers;
	svc->workers = kvi_calloc((size_t)workers, sizeof(kvs_worker));
	for (int i = 0; i < workers; i++) {
		svc->workers[i].svc = svc;
		kvp_arena_init(&svc->workers[i].arena);
	}
	kvi_err rv = kvs_service_listen(svc, url, err, errlen);
	if (rv != KVI_OK) {
		goto fail;
	}
	if ((rv = kvs_service_spawn(svc, err, errlen)) != KVI_OK) {
		goto fail;
	}
	*out = svc;
	return KVI_OK;

fail:
	kvs_service_stop(svc);
	return rv;
}

int
kvs_service_port(const kvs_service *svc)
{
	return svc->port;
}

void
kvs_service_stop(kvs_service *svc)
{
	if (svc == NULL) {
		return;
	}
	if (svc->listening) {
		nng_listener_close(svc->listener);
		svc->listening = false;
	}
	pthread_mutex_lock(&svc->mu);
	svc->stopping = true;
	for (int i = 0; i < svc->n_workers; i++) {
		if (svc->workers[i].receiving) {
			nng_aio_cancel(svc->workers[i].aio);
		}
	}
	pthread_mutex_unlock(&svc->mu);
	for (int i = 0; i < svc->n_workers; i++) {
		if (svc->workers[i].started) {
			pthread_join(svc->workers[i].thread, NULL);
		}
	}
	if (svc->sock_open) {
		nng_close(svc->sock); /* closes the contexts too */
		svc->sock_open = false;
	}
	for (int i = 0; i < svc->n_workers; i++) {
		if (svc->workers[i].aio != NULL) {
			nng_aio_free(svc->workers[i].aio);
		}
		kvp_arena_fini(&svc->workers[i].arena);
	}
	kvi_free(svc->workers);
	pthread_mutex_destroy(&svc->mu);
	kvi_free(svc);
}

void
kvs_service_stats(kvs_service *svc, kvs_stats *out)
{
	for (int k = 0; k < KVS_KIND_COUNT; k++) {
		out->requests[k] = atomic_load_explicit(&svc->requests[k],
							memory_order_relaxed);
		out->errors[k] =
		    atomic_load_explicit(&svc->errors[k], memory_order_relaxed);
		out->handler_us[k] = atomic_load_explicit(&svc->handler_us[k],
							  memory_order_relaxed);
	}
	out->malformed =
	    atomic_load_explicit(&svc->malformed, memory_order_relaxed);
	out->version_mismatches = atomic_load_explicit(&svc->version_mismatches,
						       memory_order_relaxed);
	out->no_body =
	    atomic_load_explicit(&svc->no_body, memory_order_relaxed);
	out->bad_responses =
	    atomic_load_explicit(&svc->bad_responses, memory_order_relaxed);
	out->send_failures =
	    atomic_load_explicit(&svc->send_failures, memory_order_relaxed);
}
