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
#include "clock.h"
#include "log.h"
#include "rpc.h"

/* How long a slot waits to hand a reply to its connection. rep0 queues a
 * reply behind earlier ones on the same connection, and a peer that stopped
 * reading must not hold a slot forever. */
#define KVS_SEND_TIMEOUT_MS 5000

/* Slots beyond the workers: requests answered inline keep flowing while
 * every worker is busy with a slow one. */
#define KVS_SLOTS_EXTRA 8

/* One nng context and the request it holds: received, decoded, answered
 * (inline or by a worker), its reply sent, then the next received. */
typedef struct kvs_slot {
	kvs_service *svc;
	nng_ctx ctx;
	nng_aio *aio; /* kvs_slot_cb */
	bool sending; /* the aio's operation is the reply's send */
	nng_msg *msg; /* the request, while a worker has it */
	const Kvindex__Request *req;
	kvs_kind kind;
	struct kvs_slot *next; /* in svc->queue */
	kvp_arena arena;
} kvs_slot;

struct kvs_service {
	nng_socket sock;
	bool sock_open;
	nng_listener listener;
	bool listening;
	int port;
	kvs_handler handler;
	void *arg;
	unsigned inline_kinds; /* bit per kvs_kind answered on nng's thread */
	int n_slots;
	kvs_slot *slots;
	bool slots_open; /* every slot has its context and aio */
	/* the workers and their queue */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopping;                 /* under mu */
	kvs_slot *queue, **queue_tail; /* under mu */
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

static const char *const kvs_kind_names[KVS_KIND_COUNT] = {
    [KVS_KIND_ASSIGN] = "assign",   [KVS_KIND_UNASSIGN] = "unassign",
    [KVS_KIND_QUERY] = "query",     [KVS_KIND_STATUS] = "status",
    [KVS_KIND_DUMP] = "dump",       [KVS_KIND_QUERY_BATCH] = "query_batch",
    [KVS_KIND_HANDOFF] = "handoff",
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
	case KVINDEX__REQUEST__BODY_QUERY_BATCH:
		*out = KVS_KIND_QUERY_BATCH;
		return req->query_batch != NULL;
	case KVINDEX__REQUEST__BODY_HANDOFF:
		*out = KVS_KIND_HANDOFF;
		return req->handoff != NULL;
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
kvs_service_handle(kvs_service *svc, kvs_slot *sl, const Kvindex__Request *req,
		   kvs_kind kind)
{
	Kvindex__Response resp = KVINDEX__RESPONSE__INIT;
	uint64_t t0 = kvi_now_us();
	svc->handler(svc->arg, req, &resp, &sl->arena);
	kvs_count(&svc->handler_us[kind], kvi_now_us() - t0);
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

/* kvs_slot_decode decodes the request msg into sl. Returns NULL when it
 * is ready to be handled, else the packed envelope error to reply. */
static nng_msg *
kvs_slot_decode(kvs_slot *sl, nng_msg *msg)
{
	kvs_service *svc = sl->svc;
	ProtobufCAllocator alloc;
	kvp_arena_allocator(&sl->arena, &alloc);
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
	if (!kvs_kind_of(req, &sl->kind)) {
		kvs_count(&svc->no_body, 1);
		return kvs_reply_error(KVI_EINVAL,
				       "request has no body this shard knows");
	}
	sl->req = req;
	return NULL;
}

/* kvs_slot_recv waits for the slot's next request, unless stopping. */
static void
kvs_slot_recv(kvs_slot *sl)
{
	kvs_service *svc = sl->svc;
	pthread_mutex_lock(&svc->mu);
	bool stopping = svc->stopping;
	pthread_mutex_unlock(&svc->mu);
	if (stopping) {
		return;
	}
	kvp_arena_reset(&sl->arena);
	sl->sending = false;
	nng_aio_set_timeout(sl->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(sl->ctx, sl->aio);
}

/* kvs_slot_send hands reply to the connection the slot's request came
 * from; the slot's callback then receives the next one. */
static void
kvs_slot_send(kvs_slot *sl, nng_msg *reply)
{
	sl->sending = true;
	nng_aio_set_msg(sl->aio, reply);
	nng_aio_set_timeout(sl->aio, KVS_SEND_TIMEOUT_MS);
	nng_ctx_send(sl->ctx, sl->aio);
}

/* kvs_slot_got answers a request just received: an envelope error or an
 * inline kind at once, on this (nng's) thread; anything else through a
 * worker. */
static void
kvs_slot_got(kvs_slot *sl, nng_msg *msg)
{
	kvs_service *svc = sl->svc;
	nng_msg *reply = kvs_slot_decode(sl, msg);
	if (reply == NULL && (svc->inline_kinds & (1u << sl->kind)) == 0) {
		sl->msg = msg;
		sl->next = NULL;
		pthread_mutex_lock(&svc->mu);
		*svc->queue_tail = sl;
		svc->queue_tail = &sl->next;
		pthread_cond_signal(&svc->cv);
		pthread_mutex_unlock(&svc->mu);
		return;
	}
	if (reply == NULL) {
		reply = kvs_service_handle(svc, sl, sl->req, sl->kind);
	}
	nng_msg_free(msg);
	kvs_slot_send(sl, reply);
}

static void
kvs_slot_cb(void *arg)
{
	kvs_slot *sl = arg;
	int nrv = nng_aio_result(sl->aio);
	if (sl->sending) {
		if (nrv != 0) {
			/* The reply is still ours; the requester is gone or
			 * stuck. */
			nng_msg *msg = nng_aio_get_msg(sl->aio);
			if (msg != NULL) {
				nng_msg_free(msg);
			}
			kvs_count(&sl->svc->send_failures, 1);
		}
		kvs_slot_recv(sl);
		return;
	}
	if (nrv == NNG_ECLOSED || nrv == NNG_ECANCELED) {
		return;
	}
	if (nrv != 0) {
		KVI_WARN("rpc_recv_failed", "error=\"%s\"", nng_strerror(nrv));
		kvs_slot_recv(sl);
		return;
	}
	kvs_slot_got(sl, nng_aio_get_msg(sl->aio));
}

/* kvs_worker_next waits for a slot whose request needs a worker. Returns
 * NULL when the service is stopping. */
static kvs_slot *
kvs_worker_next(kvs_service *svc)
{
	pthread_mutex_lock(&svc->mu);
	while (!svc->stopping && svc->queue == NULL) {
		pthread_cond_wait(&svc->cv, &svc->mu);
	}
	kvs_slot *sl = NULL;
	if (!svc->stopping) {
		sl = svc->queue;
		svc->queue = sl->next;
		if (svc->queue == NULL) {
			svc->queue_tail = &svc->queue;
		}
	}
	pthread_mutex_unlock(&svc->mu);
	return sl;
}

static void *
kvs_worker_main(void *arg)
{
	kvs_service *svc = arg;
	kvs_slot *sl;
	while ((sl = kvs_worker_next(svc)) != NULL) {
		nng_msg *reply = kvs_service_handle(svc, sl, sl->req, sl->kind);
		nng_msg_free(sl->msg);
		sl->msg = NULL;
		kvs_slot_send(sl, reply);
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

/* kvs_service_spawn opens every slot's context and starts the workers,
 * then the slots' first receives. */
static kvi_err
kvs_service_spawn(kvs_service *svc, char *err, size_t errlen)
{
	for (int i = 0; i < svc->n_slots; i++) {
		kvs_slot *sl = &svc->slots[i];
		if (nng_aio_alloc(&sl->aio, kvs_slot_cb, sl) != 0) {
			kvi_oom(sizeof(nng_aio *));
		}
		int nrv = nng_ctx_open(&sl->ctx, svc->sock);
		if (nrv != 0) {
			kvi_msgf(err, errlen, "rep context: %s",
				 nng_strerror(nrv));
			return kvp_err_from_nng(nrv);
		}
	}
	svc->slots_open = true;
	for (int i = 0; i < svc->n_workers; i++) {
		if (pthread_create(&svc->threads[i], NULL, kvs_worker_main,
				   svc) != 0) {
			kvi_msgf(err, errlen, "cannot start worker thread %d",
				 i);
			return KVI_EIO;
		}
		svc->n_started++;
	}
	for (int i = 0; i < svc->n_slots; i++) {
		kvs_slot_recv(&svc->slots[i]);
	}
	return KVI_OK;
}

kvi_err
kvs_service_start(const char *url, int workers, kvs_handler handler, void *arg,
		  kvs_service **out, char *err, size_t errlen)
{
	return kvs_service_start_inline(url, workers, 0, handler, arg, out, err,
					errlen);
}

kvi_err
kvs_service_start_inline(const char *url, int workers, unsigned inline_kinds,
			 kvs_handler handler, void *arg, kvs_service **out,
			 char *err, size_t errlen)
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
	svc->inline_kinds = inline_kinds;
	pthread_mutex_init(&svc->mu, NULL);
	pthread_cond_init(&svc->cv, NULL);
	svc->queue_tail = &svc->queue;
	svc->n_workers = workers;
	svc->threads = kvi_calloc((size_t)workers, sizeof(pthread_t));
	svc->n_slots = workers + KVS_SLOTS_EXTRA;
	svc->slots = kvi_calloc((size_t)svc->n_slots, sizeof(kvs_slot));
	for (int i = 0; i < svc->n_slots; i++) {
		svc->slots[i].svc = svc;
		kvp_arena_init(&svc->slots[i].arena);
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
	kvs_service_free(svc);
	return rv;
}

int
kvs_service_port(const kvs_service *svc)
{
	return svc->port;
}

void
kvs_service_free(kvs_service *svc)
{
	if (svc == NULL) {
		return;
	}
	if (svc->listening) {
		nng_listener_close(svc->listener);
		svc->listening = false;
	}
	/* the workers finish the request in hand (its reply is handed to
	 * nng) and stop; no slot receives again */
	pthread_mutex_lock(&svc->mu);
	svc->stopping = true;
	pthread_cond_broadcast(&svc->cv);
	pthread_mutex_unlock(&svc->mu);
	for (int i = 0; i < svc->n_started; i++) {
		pthread_join(svc->threads[i], NULL);
	}
	/* waits for each slot's operation and callback; a reply being sent
	 * gets up to KVS_SEND_TIMEOUT_MS */
	for (int i = 0; i < svc->n_slots && svc->slots_open; i++) {
		nng_aio_stop(svc->slots[i].aio);
	}
	if (svc->sock_open) {
		nng_close(svc->sock); /* closes the contexts too */
		svc->sock_open = false;
	}
	for (int i = 0; i < svc->n_slots; i++) {
		kvs_slot *sl = &svc->slots[i];
		if (sl->msg != NULL) {
			nng_msg_free(sl->msg); /* queued, never handled */
		}
		if (sl->aio != NULL) {
			nng_aio_free(sl->aio);
		}
		kvp_arena_fini(&sl->arena);
	}
	kvi_free(svc->slots);
	kvi_free(svc->threads);
	pthread_cond_destroy(&svc->cv);
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
