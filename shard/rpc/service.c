#include "service.h"

#include <stdio.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "rpc.h"
#include "service_int.h"

static const char *const kvs_kind_names[KVN_KIND_COUNT] = {
    [KVN_KIND_ASSIGN] = "assign",   [KVN_KIND_UNASSIGN] = "unassign",
    [KVN_KIND_QUERY] = "query",     [KVN_KIND_STATUS] = "status",
    [KVN_KIND_DUMP] = "dump",       [KVN_KIND_QUERY_BATCH] = "query_batch",
    [KVN_KIND_HANDOFF] = "handoff", [KVN_KIND_ROUTED] = "routed",
};

const char *
kvn_kind_name(kvn_kind kind)
{
	if ((unsigned)kind >= KVN_KIND_COUNT) {
		return "unknown";
	}
	return kvs_kind_names[kind];
}

void
kvn_count(_Atomic uint64_t *counter, uint64_t n)
{
	atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/* kind_of finds the kind of req's body. Returns false when it has none
 * this build knows. */
static bool
kind_of(const Kvindex__Request *req, kvn_kind *out)
{
	switch (req->body_case) {
	case KVINDEX__REQUEST__BODY_ASSIGN:
		*out = KVN_KIND_ASSIGN;
		return req->assign != NULL;
	case KVINDEX__REQUEST__BODY_UNASSIGN:
		*out = KVN_KIND_UNASSIGN;
		return req->unassign != NULL;
	case KVINDEX__REQUEST__BODY_QUERY:
		*out = KVN_KIND_QUERY;
		return req->query != NULL;
	case KVINDEX__REQUEST__BODY_STATUS:
		*out = KVN_KIND_STATUS;
		return req->status != NULL;
	case KVINDEX__REQUEST__BODY_DUMP:
		*out = KVN_KIND_DUMP;
		return req->dump != NULL;
	case KVINDEX__REQUEST__BODY_QUERY_BATCH:
		*out = KVN_KIND_QUERY_BATCH;
		return req->query_batch != NULL;
	case KVINDEX__REQUEST__BODY_HANDOFF:
		*out = KVN_KIND_HANDOFF;
		return req->handoff != NULL;
	case KVINDEX__REQUEST__BODY_ROUTED:
		*out = KVN_KIND_ROUTED;
		return req->routed != NULL;
	default:
		return false;
	}
}

/* reply_error returns a packed response with code and message and no
 * body. */
static nng_msg *
reply_error(kvi_err code, const char *message)
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

/* service_handle runs the handler on a decoded request and returns the
 * packed reply. */
static nng_msg *
service_handle(kvn_service *svc, kvp_arena *arena, const Kvindex__Request *req,
	       kvn_kind kind)
{
	Kvindex__Response resp = KVINDEX__RESPONSE__INIT;
	uint64_t t0 = kvi_now_us();
	svc->handler(svc->arg, req, &resp, arena);
	kvn_count(&svc->handler_us[kind], kvi_now_us() - t0);
	kvn_count(&svc->requests[kind], 1);

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
			 kvn_kind_name(kind), kvi_log_quote(q, sizeof(q), err));
		kvn_count(&svc->bad_responses, 1);
		kvn_count(&svc->errors[kind], 1);
		rv = rv == KVI_ETOOBIG ? KVI_ETOOBIG : KVI_EINTERNAL;
		return reply_error(rv, err);
	}
	if (resp.code != KVI_OK) {
		kvn_count(&svc->errors[kind], 1);
	}
	return reply;
}

/* decode decodes the request body[0..len) into arena. Returns NULL
 * with *req and *kind set when it is ready to be handled, else the packed
 * envelope error to reply. */
static nng_msg *
decode(kvn_service *svc, kvp_arena *arena, const uint8_t *body, size_t len,
       const Kvindex__Request **req, kvn_kind *kind)
{
	ProtobufCAllocator alloc;
	kvp_arena_allocator(arena, &alloc);
	Kvindex__Request *r;
	char err[256];
	kvi_err rv =
	    kvp_request_unpack(body, len, &alloc, &r, err, sizeof(err));
	if (rv == KVI_EVERSION) {
		kvn_count(&svc->version_mismatches, 1);
		return reply_error(rv, err);
	}
	if (rv != KVI_OK) {
		kvn_count(&svc->malformed, 1);
		return reply_error(KVI_EPROTO, err);
	}
	if (!kind_of(r, kind)) {
		kvn_count(&svc->no_body, 1);
		return reply_error(KVI_EINVAL,
				   "request has no body this shard knows");
	}
	*req = r;
	return NULL;
}

nng_msg *
kvn_answer(kvn_service *svc, kvp_arena *arena, const uint8_t *body, size_t len)
{
	const Kvindex__Request *req;
	kvn_kind kind;
	nng_msg *reply = decode(svc, arena, body, len, &req, &kind);
	if (reply != NULL) {
		return reply;
	}
	if ((svc->inline_kinds & (1u << kind)) == 0) {
		return NULL; /* a worker's: decoded again there */
	}
	return service_handle(svc, arena, req, kind);
}

void
kvn_submit(kvn_service *svc, kvn_job *job)
{
	job->next = NULL;
	pthread_mutex_lock(&svc->mu);
	*svc->queue_tail = job;
	svc->queue_tail = &job->next;
	pthread_cond_signal(&svc->cv);
	pthread_mutex_unlock(&svc->mu);
}

/* worker_next waits for a job. Returns NULL when the service is
 * stopping. */
static kvn_job *
worker_next(kvn_service *svc)
{
	pthread_mutex_lock(&svc->mu);
	while (!svc->stopping && svc->queue == NULL) {
		pthread_cond_wait(&svc->cv, &svc->mu);
	}
	kvn_job *job = NULL;
	if (!svc->stopping) {
		job = svc->queue;
		svc->queue = job->next;
		if (svc->queue == NULL) {
			svc->queue_tail = &svc->queue;
		}
	}
	pthread_mutex_unlock(&svc->mu);
	return job;
}

static void *
worker_main(void *arg)
{
	kvn_service *svc = arg;
	kvp_arena arena;
	kvp_arena_init(&arena);
	kvn_job *job;
	while ((job = worker_next(svc)) != NULL) {
		const Kvindex__Request *req;
		kvn_kind kind;
		/* the loop decoded it already: this cannot fail */
		job->reply =
		    decode(svc, &arena, job->body, job->len, &req, &kind);
		if (job->reply == NULL) {
			job->reply = service_handle(svc, &arena, req, kind);
		}
		kvp_arena_reset(&arena);
		kvn_net_done(job);
	}
	kvp_arena_fini(&arena);
	return NULL;
}

/* service_spawn starts the workers. */
static kvi_err
service_spawn(kvn_service *svc, char *err, size_t errlen)
{
	for (int i = 0; i < svc->n_workers; i++) {
		if (pthread_create(&svc->threads[i], NULL, worker_main, svc) !=
		    0) {
			kvi_msgf(err, errlen, "cannot start worker thread %d",
				 i);
			return KVI_EIO;
		}
		svc->n_started++;
	}
	return KVI_OK;
}

kvi_err
kvn_service_open_url(const char *url, int workers, kvn_handler handler,
		     void *arg, kvn_service **out, char *err, size_t errlen)
{
	kvn_service_opts o = {.url = url, .workers = workers};
	return kvn_service_open(&o, handler, arg, out, err, errlen);
}

kvi_err
kvn_service_open(const kvn_service_opts *o, kvn_handler handler, void *arg,
		 kvn_service **out, char *err, size_t errlen)
{
	int loops = o->loops == 0 ? KVN_LOOPS_DEFAULT : o->loops;
	if (o->url == NULL || handler == NULL || out == NULL ||
	    o->workers < 1 || o->workers > KVN_WORKERS_MAX || loops < 1 ||
	    loops > KVN_LOOPS_MAX) {
		kvi_msgf(err, errlen,
			 "invalid service arguments (workers %d, loops %d)",
			 o->workers, o->loops);
		return KVI_EINVAL;
	}
	kvn_service *svc = kvi_calloc(1, sizeof(*svc));
	svc->handler = handler;
	svc->arg = arg;
	svc->inline_kinds = o->inline_kinds;
	svc->listen_fd = -1;
	pthread_mutex_init(&svc->mu, NULL);
	pthread_cond_init(&svc->cv, NULL);
	svc->queue_tail = &svc->queue;
	svc->n_workers = o->workers;
	svc->threads = kvi_calloc((size_t)o->workers, sizeof(pthread_t));
	kvi_err rv = kvn_net_listen(svc, o->url, err, errlen);
	if (rv == KVI_OK) {
		rv = service_spawn(svc, err, errlen);
	}
	if (rv == KVI_OK) {
		rv = kvn_net_start(svc, loops, err, errlen);
	}
	if (rv != KVI_OK) {
		kvn_service_free(svc);
		return rv;
	}
	*out = svc;
	return KVI_OK;
}

int
kvn_service_port(const kvn_service *svc)
{
	return svc->port;
}

void
kvn_service_free(kvn_service *svc)
{
	if (svc == NULL) {
		return;
	}
	/* no new requests; the workers finish the one in hand and stop */
	kvn_net_quiet(svc);
	pthread_mutex_lock(&svc->mu);
	svc->stopping = true;
	pthread_cond_broadcast(&svc->cv);
	pthread_mutex_unlock(&svc->mu);
	for (int i = 0; i < svc->n_started; i++) {
		pthread_join(svc->threads[i], NULL);
	}
	/* their replies go out, for up to a second */
	kvn_net_stop(svc);
	while (svc->queue != NULL) {
		kvn_job *job = svc->queue; /* queued, never handled */
		svc->queue = job->next;
		kvn_net_drop(job);
	}
	kvi_free(svc->ipc_path);
	kvi_free(svc->url);
	kvi_free(svc->threads);
	pthread_cond_destroy(&svc->cv);
	pthread_mutex_destroy(&svc->mu);
	kvi_free(svc);
}

void
kvn_service_stats(kvn_service *svc, kvn_stats *out)
{
	for (int k = 0; k < KVN_KIND_COUNT; k++) {
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
