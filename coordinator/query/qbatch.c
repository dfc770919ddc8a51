#include "qbatch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "alloc.h"
#include "shardset.h"

struct kvc_qbatch {
	kvc_qbatch_send_fn send;
	void *ctx;
	const char *url;
	int max_inflight;
	size_t max_batch;
	pthread_mutex_t mu;
	int inflight;                  /* messages in flight; under mu */
	kvc_qbatch_item *head, **tail; /* queued; under mu */
};

/* One message in flight: the items it carries, in order. */
typedef struct kvc_qsend {
	kvc_qbatch *b;
	size_t n;
	kvc_qbatch_item *items[];
} kvc_qsend;

static kvi_err
qbatch_nng(void *ctx, const Kvindex__Request *req, int timeout_ms,
	   kvp_call_done done, void *arg)
{
	return kvp_call_async(ctx, req, timeout_ms, done, arg);
}

kvc_qbatch *
kvc_qbatch_alloc(kvp_client *client, int max_inflight, size_t max_batch)
{
	return kvc_qbatch_alloc_via(qbatch_nng, client, kvp_client_url(client),
				    max_inflight, max_batch);
}

kvc_qbatch *
kvc_qbatch_alloc_via(kvc_qbatch_send_fn send, void *ctx, const char *url,
		     int max_inflight, size_t max_batch)
{
	kvc_qbatch *b = kvi_calloc(1, sizeof(*b));
	b->send = send;
	b->ctx = ctx;
	b->url = url;
	b->max_inflight = max_inflight > 0 ? max_inflight : KVC_QBATCH_INFLIGHT;
	b->max_batch = max_batch > 0 ? max_batch : KVC_QBATCH_MAX;
	pthread_mutex_init(&b->mu, NULL);
	b->tail = &b->head;
	return b;
}

void
kvc_qbatch_free(kvc_qbatch *b)
{
	if (b == NULL) {
		return;
	}
	pthread_mutex_destroy(&b->mu);
	kvi_free(b);
}

/* qbatch_push puts it on the front of *list, failed with rv. */
static void
qbatch_push(kvc_qbatch_item **list, kvc_qbatch_item *it, kvi_err rv)
{
	it->failed = rv;
	it->next = *list;
	*list = it;
}

/* qbatch_fail calls back every item of list with its error. */
static void
qbatch_fail(kvc_qbatch *b, kvc_qbatch_item *list)
{
	const char *url = b->url;
	while (list != NULL) {
		kvc_qbatch_item *next = list->next;
		char err[300];
		if (list->failed == KVI_ETIMEDOUT) {
			snprintf(err, sizeof(err),
				 "no reply from %s within the deadline", url);
		} else {
			snprintf(err, sizeof(err), "query not sent to %s: %s",
				 url, kvi_strerror(list->failed));
		}
		list->done(list->arg, list->failed, NULL, err);
		list = next;
	}
}

/* qbatch_take removes up to max_batch queued items and returns them
 * as a list, NULL when none wait. Under b->mu. */
static kvc_qbatch_item *
qbatch_take(kvc_qbatch *b)
{
	kvc_qbatch_item *list = b->head, **end = &b->head;
	for (size_t n = 0; *end != NULL && n < b->max_batch; n++) {
		end = &(*end)->next;
	}
	b->head = *end;
	*end = NULL;
	if (b->head == NULL) {
		b->tail = &b->head;
	}
	return list;
}

/* qbatch_live moves the items of *list whose deadline has passed to
 * *failed, and returns how many remain and their earliest deadline. */
static size_t
qbatch_live(kvc_qbatch_item **list, kvc_qbatch_item **failed, int64_t *deadline)
{
	int64_t now = kvi_now_ms();
	size_t n = 0;
	*deadline = INT64_MAX;
	for (kvc_qbatch_item **p = list; *p != NULL;) {
		kvc_qbatch_item *it = *p;
		if (it->deadline_ms <= now) {
			*p = it->next;
			qbatch_push(failed, it, KVI_ETIMEDOUT);
			continue;
		}
		if (it->deadline_ms < *deadline) {
			*deadline = it->deadline_ms;
		}
		n++;
		p = &it->next;
	}
	return n;
}

static void qbatch_reply(void *arg, kvi_err rv, Kvindex__Response *resp,
			 const char *err);

/* qbatch_start sends the n items of list as one message, with the
 * time left until deadline as its timeout. Returns KVI_OK, or why it
 * could not be sent (list untouched). */
static kvi_err
qbatch_start(kvc_qbatch *b, kvc_qbatch_item *list, size_t n, int64_t deadline)
{
	kvc_qsend *s = kvi_malloc(sizeof(*s) + n * sizeof(s->items[0]));
	Kvindex__QueryRequest **qs = kvi_malloc(n * sizeof(*qs));
	s->b = b;
	s->n = n;
	size_t i = 0;
	for (kvc_qbatch_item *it = list; it != NULL; it = it->next, i++) {
		s->items[i] = it;
		qs[i] = (Kvindex__QueryRequest *)it->query;
	}
	Kvindex__QueryBatchRequest qb = KVINDEX__QUERY_BATCH_REQUEST__INIT;
	qb.queries = qs;
	qb.n_queries = n;
	Kvindex__Request r = KVINDEX__REQUEST__INIT;
	r.body_case = KVINDEX__REQUEST__BODY_QUERY_BATCH;
	r.query_batch = &qb;
	int64_t left = deadline - kvi_now_ms();
	kvi_err rv =
	    b->send(b->ctx, &r, left > 0 ? (int)left : 1, qbatch_reply, s);
	/* once sent, s and the items may be answered already: hands off */
	kvi_free(qs);
	if (rv != KVI_OK) {
		kvi_free(s);
	}
	return rv;
}

/* qbatch_send sends list holding one of b's in-flight slots. A list
 * that cannot be sent is failed and the next queued items are tried,
 * until a message is in flight or nothing waits; then the slot is given
 * back. The items it fails are put on *failed, for the caller to call
 * back once it is done with b. */
static void
qbatch_send(kvc_qbatch *b, kvc_qbatch_item *list, kvc_qbatch_item **failed)
{
	while (list != NULL) {
		int64_t deadline;
		size_t n = qbatch_live(&list, failed, &deadline);
		kvi_err rv =
		    n > 0 ? qbatch_start(b, list, n, deadline) : KVI_ETIMEDOUT;
		if (n > 0 && rv == KVI_OK) {
			return;
		}
		while (list != NULL) {
			kvc_qbatch_item *it = list;
			list = it->next;
			qbatch_push(failed, it, rv);
		}
		pthread_mutex_lock(&b->mu);
		list = qbatch_take(b);
		if (list == NULL) {
			b->inflight--;
		}
		pthread_mutex_unlock(&b->mu);
	}
}

bool
kvc_qbatch_idle(kvc_qbatch *b)
{
	pthread_mutex_lock(&b->mu);
	bool idle = b->inflight == 0 && b->head == NULL;
	pthread_mutex_unlock(&b->mu);
	return idle;
}

void
kvc_qbatch_submit(kvc_qbatch *b, kvc_qbatch_item *it)
{
	it->next = NULL;
	pthread_mutex_lock(&b->mu);
	if (b->inflight >= b->max_inflight) {
		*b->tail = it;
		b->tail = &it->next;
		pthread_mutex_unlock(&b->mu);
		return;
	}
	b->inflight++;
	pthread_mutex_unlock(&b->mu);
	kvc_qbatch_item *failed = NULL;
	qbatch_send(b, it, &failed);
	qbatch_fail(b, failed);
}

/* qbatch_answer returns answer i of a reply to s, or NULL with *rv
 * and err set. */
static const Kvindex__QueryResponse *
qbatch_answer(const kvc_qsend *s, const Kvindex__Response *resp, size_t i,
	      kvi_err *rv, char *err, size_t errlen)
{
	const Kvindex__QueryBatchResponse *qb =
	    resp != NULL &&
		    resp->body_case == KVINDEX__RESPONSE__BODY_QUERY_BATCH
		? resp->query_batch
		: NULL;
	if (qb == NULL || qb->n_answers != s->n || qb->answers[i] == NULL) {
		*rv = KVI_EPROTO;
		snprintf(err, errlen,
			 "%s answered a batch of %zu queries with "
			 "no matching answers",
			 s->b->url, s->n);
		return NULL;
	}
	const Kvindex__QueryResponse *qr = qb->answers[i];
	if (qr->has_code && qr->code != KVI_OK) {
		*rv = qr->code < KVI_ERR_COUNT ? (kvi_err)qr->code : KVI_EPROTO;
		snprintf(err, errlen, "%s",
			 qr->error != NULL ? qr->error : kvi_strerror(*rv));
		return NULL;
	}
	*rv = KVI_OK;
	err[0] = '\0';
	return qr;
}

/* qbatch_reply ends a message: the next queued items leave first,
 * then every item of this one is called back with its answer. */
static void
qbatch_reply(void *arg, kvi_err rv, Kvindex__Response *resp, const char *err)
{
	kvc_qsend *s = arg;
	kvc_qbatch *b = s->b;
	pthread_mutex_lock(&b->mu);
	kvc_qbatch_item *next = qbatch_take(b);
	if (next == NULL) {
		b->inflight--;
	}
	pthread_mutex_unlock(&b->mu);
	kvc_qbatch_item *failed = NULL;
	qbatch_send(b, next, &failed);
	/* b is not touched past this point but to report failures, which
	 * come before the items of this reply release their shard */
	qbatch_fail(b, failed);
	for (size_t i = 0; i < s->n; i++) {
		kvc_qbatch_item *it = s->items[i];
		if (rv != KVI_OK) {
			it->done(it->arg, rv, NULL, err);
			continue;
		}
		kvi_err qrv;
		char qerr[300];
		const Kvindex__QueryResponse *qr =
		    qbatch_answer(s, resp, i, &qrv, qerr, sizeof(qerr));
		it->done(it->arg, qrv, qr, qerr);
	}
	if (resp != NULL) {
		kvindex__response__free_unpacked(resp, NULL);
	}
	kvi_free(s);
}
