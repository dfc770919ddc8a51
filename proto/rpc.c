#include "rpc.h"

#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "cli.h"
#include "clock.h"

struct kvp_client {
	nng_socket sock;
	bool sock_open;
	char *url;
	pthread_mutex_t mu;
	pthread_cond_t idle; /* signalled when inflight drops to 0 */
	unsigned inflight;   /* calls started and not finished */
	bool closing;
	/* finished calls kept with their context and aio for the next one,
	 * so a call opens and reaps neither; under mu */
	struct kvp_call_state *idle_calls;
	unsigned n_idle;
};

/* How many finished calls a client keeps for reuse. */
#define KVP_IDLE_CALLS_MAX 64

/* One call in flight. It first waits for the request to be handed to a
 * connection (sending), then for the reply; both under one deadline. */
typedef struct kvp_call_state {
	kvp_client *client;
	nng_ctx ctx;
	nng_aio *aio;
	bool sending;
	int timeout_ms;
	int64_t deadline; /* monotonic ms */
	kvp_call_done done;
	void *arg;
	struct kvp_call_state *next; /* in the client's idle_calls */
	char err[256];
} kvp_call_state;

/* What a blocking kvp_call waits on. */
typedef struct kvp_waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	kvi_err rv;
	Kvindex__Response *resp;
	char *err;
	size_t errlen;
} kvp_waiter;

kvi_err
kvp_err_from_nng(int nng_rv)
{
	switch (nng_rv) {
	case 0:
		return KVI_OK;
	case NNG_ENOMEM:
		kvi_oom(0);
	case NNG_ETIMEDOUT:
		return KVI_ETIMEDOUT;
	case NNG_ECLOSED:
	case NNG_ECANCELED:
		return KVI_ECLOSED;
	case NNG_ECONNREFUSED:
	case NNG_ECONNRESET:
	case NNG_ECONNSHUT:
	case NNG_ECONNABORTED:
	case NNG_EUNREACHABLE:
		return KVI_EUNREACHABLE;
	case NNG_EINVAL:
	case NNG_EADDRINVAL:
	case NNG_ENOTSUP:
		return KVI_EINVAL;
	default:
		return KVI_EIO;
	}
}

/*
 * Envelope.
 */

/* kvp_varint_get reads one base-128 varint at *p, advancing *p. Returns
 * false when it is truncated or longer than ten bytes. */
static bool
kvp_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*p == end) {
			return false;
		}
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0) {
			*out = v;
			return true;
		}
	}
	return false;
}

kvi_err
kvp_envelope_version(const void *buf, size_t len, uint32_t *out)
{
	if (len == 0) {
		return KVI_EPROTO;
	}
	const uint8_t *p = buf;
	const uint8_t *end = p + len;
	bool found = false;
	uint64_t version = 0;
	while (p < end) {
		uint64_t key, v;
		if (!kvp_varint_get(&p, end, &key) || (key >> 3) == 0 ||
		    (key >> 3) > 0x1fffffff) {
			return KVI_EPROTO;
		}
		bool is_version = (key >> 3) == 1;
		switch (key & 7) {
		case 0: /* varint */
			if (!kvp_varint_get(&p, end, &v)) {
				return KVI_EPROTO;
			}
			if (is_version) {
				version = v;
				found = true;
			}
			continue;
		case 1: /* fixed64 */
			v = 8;
			break;
		case 2: /* length-delimited */
			if (!kvp_varint_get(&p, end, &v)) {
				return KVI_EPROTO;
			}
			break;
		case 5: /* fixed32 */
			v = 4;
			break;
		default: /* groups and undefined wire types */
			return KVI_EPROTO;
		}
		if (is_version || v > (uint64_t)(end - p)) {
			return KVI_EPROTO;
		}
		p += v;
	}
	if (!found || version > UINT32_MAX) {
		return KVI_EPROTO;
	}
	*out = (uint32_t)version;
	return KVI_OK;
}

kvi_err
kvp_version_check(uint32_t peer, char *err, size_t errlen)
{
	if (peer == KVP_VERSION) {
		return KVI_OK;
	}
	kvi_msgf(err, errlen,
		 "peer speaks protocol version %u, this build speaks %u",
		 (unsigned)peer, (unsigned)KVP_VERSION);
	return KVI_EVERSION;
}

/* kvp_message_pack packs m, named what in messages, into a new nng
 * message after checking its required fields and its size. */
static kvi_err
kvp_message_pack(const ProtobufCMessage *m, const char *what, nng_msg **out,
		 char *err, size_t errlen)
{
	if (!protobuf_c_message_check(m)) {
		kvi_msgf(err, errlen, "%s lacks a required field", what);
		return KVI_EINVAL;
	}
	size_t size = protobuf_c_message_get_packed_size(m);
	if (size > KVP_MSG_MAX) {
		kvi_msgf(err, errlen,
			 "%s of %zu bytes exceeds the %zu-byte message limit",
			 what, size, KVP_MSG_MAX);
		return KVI_ETOOBIG;
	}
	nng_msg *msg;
	if (nng_msg_alloc(&msg, size) != 0) {
		kvi_oom(size);
	}
	protobuf_c_message_pack(m, nng_msg_body(msg));
	*out = msg;
	return KVI_OK;
}

static bool
kvp_request_has_body(const Kvindex__Request *req)
{
	switch (req->body_case) {
	case KVINDEX__REQUEST__BODY_ASSIGN:
		return req->assign != NULL;
	case KVINDEX__REQUEST__BODY_UNASSIGN:
		return req->unassign != NULL;
	case KVINDEX__REQUEST__BODY_QUERY:
		return req->query != NULL;
	case KVINDEX__REQUEST__BODY_STATUS:
		return req->status != NULL;
	case KVINDEX__REQUEST__BODY_DUMP:
		return req->dump != NULL;
	case KVINDEX__REQUEST__BODY_QUERY_BATCH:
		return req->query_batch != NULL;
	case KVINDEX__REQUEST__BODY_HANDOFF:
		return req->handoff != NULL;
	case KVINDEX__REQUEST__BODY_ROUTED:
		return req->routed != NULL;
	default:
		return false;
	}
}

static char *kvp_secret;
static size_t kvp_secret_len;

void
kvp_secret_set(const char *secret)
{
	kvi_free(kvp_secret);
	kvp_secret = NULL;
	kvp_secret_len = 0;
	if (secret != NULL && secret[0] != '\0') {
		kvp_secret = kvi_strdup(secret);
		kvp_secret_len = strlen(secret);
	}
}

kvi_err
kvp_secret_load(const char *path, char *err, size_t errlen)
{
	char buf[KVP_SECRET_MAX + 1];
	kvi_err rv = kvi_secret_read(path, buf, sizeof(buf), err, errlen);
	if (rv == KVI_OK) {
		kvp_secret_set(buf);
	}
	return rv;
}

bool
kvp_request_authentic(const Kvindex__Request *req)
{
	if (kvp_secret == NULL) {
		return true;
	}
	/* constant time over the secret: what differs, not where */
	size_t n = req->has_auth ? req->auth.len : 0;
	unsigned diff = n != kvp_secret_len;
	for (size_t i = 0; i < kvp_secret_len; i++) {
		unsigned char got = i < n ? req->auth.data[i] : 0;
		diff |= got ^ (unsigned char)kvp_secret[i];
	}
	return diff == 0;
}

kvi_err
kvp_request_pack(const Kvindex__Request *req, nng_msg **out, char *err,
		 size_t errlen)
{
	if (!kvp_request_has_body(req)) {
		kvi_msgf(err, errlen, "request has no body");
		return KVI_EINVAL;
	}
	Kvindex__Request copy = *req;
	if (copy.version == 0) {
		copy.version = KVP_VERSION;
	}
	if (kvp_secret != NULL) {
		copy.has_auth = true;
		copy.auth.data = (uint8_t *)kvp_secret;
		copy.auth.len = kvp_secret_len;
	}
	return kvp_message_pack(&copy.base, "request", out, err, errlen);
}

kvi_err
kvp_response_pack(const Kvindex__Response *resp, nng_msg **out, char *err,
		  size_t errlen)
{
	return kvp_message_pack(&resp->base, "response", out, err, errlen);
}

/* kvp_envelope_check reads and checks the version of a packed message named
 * what, before anything else is decoded. */
static kvi_err
kvp_envelope_check(const void *buf, size_t len, const char *what, char *err,
		   size_t errlen)
{
	uint32_t version;
	if (kvp_envelope_version(buf, len, &version) != KVI_OK) {
		kvi_msgf(err, errlen, "malformed %s (%zu bytes)", what, len);
		return KVI_EPROTO;
	}
	return kvp_version_check(version, err, errlen);
}

kvi_err
kvp_request_unpack(const void *buf, size_t len, ProtobufCAllocator *alloc,
		   Kvindex__Request **out, char *err, size_t errlen)
{
	kvi_err rv = kvp_envelope_check(buf, len, "request", err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	Kvindex__Request *req = kvindex__request__unpack(alloc, len, buf);
	if (req == NULL) {
		kvi_msgf(err, errlen, "malformed request (%zu bytes)", len);
		return KVI_EPROTO;
	}
	*out = req;
	return KVI_OK;
}

/* The system allocator, except that it aborts on out-of-memory, so that
 * unpack returning NULL always means malformed input. Messages unpacked with
 * it are freed with the default allocator (free). */
static void *
kvp_heap_alloc(void *data, size_t size)
{
	(void)data;
	return kvi_malloc(size);
}

static void
kvp_heap_free(void *data, void *ptr)
{
	(void)data;
	kvi_free(ptr);
}

static ProtobufCAllocator kvp_heap = {kvp_heap_alloc, kvp_heap_free, NULL};

kvi_err
kvp_response_unpack(const void *buf, size_t len, Kvindex__Response **out,
		    char *err, size_t errlen)
{
	kvi_err rv = kvp_envelope_check(buf, len, "response", err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	Kvindex__Response *resp =
	    kvindex__response__unpack(&kvp_heap, len, buf);
	if (resp == NULL) {
		kvi_msgf(err, errlen, "malformed response (%zu bytes)", len);
		return KVI_EPROTO;
	}
	*out = resp;
	return KVI_OK;
}

/*
 * Client.
 */

kvi_err
kvp_client_open(const char *url, kvp_client **out)
{
	if (url == NULL) {
		return KVI_EINVAL;
	}
	kvp_client *c = kvi_calloc(1, sizeof(*c));
	c->url = kvi_strdup(url);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->idle, NULL);

	nng_dialer dialer;
	int nrv = nng_req0_open(&c->sock);
	if (nrv != 0) {
		goto fail;
	}
	c->sock_open = true;
	/* A request is sent once: nng would otherwise resend it after a
	 * minute, or at once on a new connection if the old one broke, and
	 * an assign must not be applied twice behind the caller's back. */
	if ((nrv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME,
				     NNG_DURATION_INFINITE)) != 0 ||
	    (nrv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ,
				       KVP_MSG_MAX)) != 0 ||
	    (nrv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT,
				     KVP_RECONNECT_MIN_MS)) != 0 ||
	    (nrv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT,
				     KVP_RECONNECT_MAX_MS)) != 0) {
		goto fail;
	}
	if ((nrv = nng_dialer_create(&dialer, c->sock, url)) != 0 ||
	    (nrv = nng_dialer_start(dialer, NNG_FLAG_NONBLOCK)) != 0) {
		goto fail;
	}
	*out = c;
	return KVI_OK;

fail:
	kvp_client_close(c);
	return kvp_err_from_nng(nrv);
}

void
kvp_client_close(kvp_client *c)
{
	if (c == NULL) {
		return;
	}
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	pthread_mutex_unlock(&c->mu);
	if (c->sock_open) {
		/* Aborts every context: calls in flight finish with
		 * NNG_ECLOSED through their callbacks. */
		nng_close(c->sock);
		c->sock_open = false;
	}
	pthread_mutex_lock(&c->mu);
	while (c->inflight > 0) {
		pthread_cond_wait(&c->idle, &c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	while (c->idle_calls != NULL) {
		kvp_call_state *st = c->idle_calls;
		c->idle_calls = st->next;
		/* waits for the end of the callback that kept it */
		nng_aio_free(st->aio);
		kvi_free(st);
	}
	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->mu);
	kvi_free(c->url);
	kvi_free(c);
}

const char *
kvp_client_url(const kvp_client *c)
{
	return c->url;
}

unsigned
kvp_client_idle_calls(kvp_client *c)
{
	pthread_mutex_lock(&c->mu);
	unsigned n = c->n_idle;
	pthread_mutex_unlock(&c->mu);
	return n;
}

/* kvp_client_release ends one call's claim on c; after it, c may be
 * freed by kvp_client_close. */
static void
kvp_client_release(kvp_client *c)
{
	pthread_mutex_lock(&c->mu);
	if (--c->inflight == 0) {
		pthread_cond_broadcast(&c->idle);
	}
	pthread_mutex_unlock(&c->mu);
}

/* kvp_call_finish tells the caller the outcome and keeps the call for the
 * next one or frees it. It runs on an nng thread, inside the callback of
 * st->aio, which is why the aio is reaped rather than freed. */
static void
kvp_call_finish(kvp_call_state *st, kvi_err rv, Kvindex__Response *resp,
		bool replied)
{
	kvp_client *c = st->client;
	if (rv == KVI_OK) {
		st->err[0] = '\0';
	}
	st->done(st->arg, rv, resp, st->err);
	/* Only a context that got its reply is done with its request and
	 * reused; st is not touched once it is kept. */
	pthread_mutex_lock(&c->mu);
	bool keep = replied && !c->closing && c->n_idle < KVP_IDLE_CALLS_MAX;
	if (keep) {
		st->next = c->idle_calls;
		c->idle_calls = st;
		c->n_idle++;
	} else if (!c->closing) {
		/* under mu, so never beside kvp_client_close's nng_close,
		 * which closes every context of the socket itself */
		nng_ctx_close(st->ctx);
	}
	pthread_mutex_unlock(&c->mu);
	if (!keep) {
		nng_aio_reap(st->aio);
		kvi_free(st);
	}
	kvp_client_release(c);
}

/* kvp_call_fail ends a call whose send or receive failed with nng_rv. */
static void
kvp_call_fail(kvp_call_state *st, int nng_rv)
{
	kvp_client *c = st->client;
	kvi_err rv = kvp_err_from_nng(nng_rv);
	pthread_mutex_lock(&c->mu);
	if (c->closing) {
		/* Closing the socket drops its connections first, which a
		 * call waiting for its reply sees as a lost connection. */
		rv = KVI_ECLOSED;
	}
	pthread_mutex_unlock(&c->mu);
	const char *url = c->url;
	switch (rv) {
	case KVI_ETIMEDOUT:
		kvi_msgf(st->err, sizeof(st->err), "%s %s within %d ms",
			 st->sending ? "no connection to" : "no reply from",
			 url, st->timeout_ms);
		break;
	case KVI_EUNREACHABLE:
		kvi_msgf(st->err, sizeof(st->err),
			 "connection to %s lost before the reply", url);
		break;
	case KVI_ECLOSED:
		kvi_msgf(st->err, sizeof(st->err), "client for %s closed", url);
		break;
	default:
		kvi_msgf(st->err, sizeof(st->err), "call to %s: %s", url,
			 nng_strerror(nng_rv));
		break;
	}
	kvp_call_finish(st, rv, NULL, false);
}

kvi_err
kvp_reply_decode(const void *buf, size_t len, const char *url,
		 Kvindex__Response **out, char *err, size_t errlen)
{
	*out = NULL;
	Kvindex__Response *resp = NULL;
	kvi_err rv = kvp_response_unpack(buf, len, &resp, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	*out = resp;
	uint32_t code = resp->code;
	if (code >= KVI_ERR_COUNT) {
		kvi_msgf(err, errlen,
			 "reply from %s carries unknown error code %u: %s", url,
			 (unsigned)code,
			 resp->error != NULL ? resp->error : "");
		return KVI_EPROTO;
	}
	if (code != KVI_OK) {
		kvi_msgf(err, errlen, "%s",
			 resp->error != NULL ? resp->error
					     : kvi_strerror((kvi_err)code));
		return (kvi_err)code;
	}
	return KVI_OK;
}

/* kvp_call_reply decodes the reply msg (consuming it) and ends the call. */
static void
kvp_call_reply(kvp_call_state *st, nng_msg *msg)
{
	Kvindex__Response *resp;
	kvi_err rv =
	    kvp_reply_decode(nng_msg_body(msg), nng_msg_len(msg),
			     st->client->url, &resp, st->err, sizeof(st->err));
	nng_msg_free(msg);
	kvp_call_finish(st, rv, resp, true); /* a reply came: reusable */
}

static void
kvp_call_cb(void *arg)
{
	kvp_call_state *st = arg;
	int nrv = nng_aio_result(st->aio);
	if (nrv != 0) {
		/* A failed send hands the request back to us. */
		nng_msg *msg = nng_aio_get_msg(st->aio);
		if (st->sending && msg != NULL) {
			nng_msg_free(msg);
		}
		kvp_call_fail(st, nrv);
		return;
	}
	if (!st->sending) {
		kvp_call_reply(st, nng_aio_get_msg(st->aio));
		return;
	}
	st->sending = false;
	int64_t left = st->deadline - kvi_now_ms();
	if (left <= 0) {
		kvp_call_fail(st, NNG_ETIMEDOUT);
		return;
	}
	nng_aio_set_timeout(st->aio, (nng_duration)left);
	nng_ctx_recv(st->ctx, st->aio);
}

/* kvp_call_start packs req and sends it on a new context of c. On KVI_OK,
 * done runs exactly once, later, on an nng thread. */
static kvi_err
kvp_call_start(kvp_client *c, const Kvindex__Request *req, int timeout_ms,
	       kvp_call_done done, void *arg, char *err, size_t errlen)
{
	if (c == NULL || req == NULL || done == NULL || timeout_ms <= 0) {
		kvi_msgf(err, errlen, "invalid call arguments");
		return KVI_EINVAL;
	}
	nng_msg *msg;
	kvi_err rv = kvp_request_pack(req, &msg, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	pthread_mutex_lock(&c->mu);
	if (c->closing) {
		pthread_mutex_unlock(&c->mu);
		nng_msg_free(msg);
		kvi_msgf(err, errlen, "client for %s closed", c->url);
		return KVI_ECLOSED;
	}
	c->inflight++;
	kvp_call_state *st = c->idle_calls;
	if (st != NULL) {
		c->idle_calls = st->next;
		c->n_idle--;
	}
	pthread_mutex_unlock(&c->mu);

	if (st == NULL) {
		st = kvi_calloc(1, sizeof(*st));
		int nrv = nng_aio_alloc(&st->aio, kvp_call_cb, st);
		if (nrv != 0) {
			kvi_oom(sizeof(nng_aio *));
		}
		if ((nrv = nng_ctx_open(&st->ctx, c->sock)) != 0) {
			/* The socket was closed under us. */
			nng_msg_free(msg);
			nng_aio_free(st->aio);
			kvi_free(st);
			kvp_client_release(c);
			kvi_msgf(err, errlen, "client for %s: %s", c->url,
				 nng_strerror(nrv));
			return kvp_err_from_nng(nrv);
		}
	}
	st->client = c;
	st->sending = true;
	st->timeout_ms = timeout_ms;
	st->deadline = kvi_now_ms() + timeout_ms;
	st->done = done;
	st->arg = arg;
	st->next = NULL;
	st->err[0] = '\0';
	nng_aio_set_msg(st->aio, msg);
	nng_aio_set_timeout(st->aio, timeout_ms);
	nng_ctx_send(st->ctx, st->aio);
	return KVI_OK;
}

kvi_err
kvp_call_async(kvp_client *c, const Kvindex__Request *req, int timeout_ms,
	       kvp_call_done done, void *arg)
{
	return kvp_call_start(c, req, timeout_ms, done, arg, NULL, 0);
}

static void
kvp_waiter_done(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	kvp_waiter *w = arg;
	pthread_mutex_lock(&w->mu);
	w->rv = rv;
	w->resp = resp;
	kvi_msgf(w->err, w->errlen, "%s", err);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

kvi_err
kvp_call(kvp_client *c, const Kvindex__Request *req, int timeout_ms,
	 Kvindex__Response **resp, char *err, size_t errlen)
{
	if (resp != NULL) {
		*resp = NULL;
	}
	kvi_msgf(err, errlen, "%s", "");
	kvp_waiter w = {.err = err, .errlen = errlen};
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	kvi_err rv = kvp_call_start(c, req, timeout_ms, kvp_waiter_done, &w,
				    err, errlen);
	if (rv == KVI_OK) {
		pthread_mutex_lock(&w.mu);
		while (!w.done) {
			pthread_cond_wait(&w.cv, &w.mu);
		}
		pthread_mutex_unlock(&w.mu);
		rv = w.rv;
		if (resp != NULL) {
			*resp = w.resp;
		} else if (w.resp != NULL) {
			kvindex__response__free_unpacked(w.resp, NULL);
		}
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	return rv;
}
