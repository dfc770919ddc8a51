/*
 * recover_fetch.c - the `/kv_recover` fetcher thread.
 *
 * State shared with other threads lives under f->mu: the waiting fetches
 * (FIFO), the cancellations not yet applied, the finished results (FIFO)
 * and the stopping flag. Everything else - the multi handle's running
 * transfers - belongs to the fetcher thread alone. Other threads wake the
 * thread with curl_multi_wakeup(), always while holding f->mu, so the multi
 * handle cannot be cleaned up under them.
 *
 * Each submission gets a serial number. A cancellation records the token
 * and the next serial: it covers exactly the submissions made before it.
 * kvr_fetcher_cancel() itself forgets waiting fetches and queued results;
 * the thread aborts running ones at the top of its next loop, and until
 * then drops any result a recorded cancellation covers.
 *
 * The first-byte and idle deadlines are the thread's: libcurl's callbacks
 * stamp when a request went out (CURLOPT_PREREQFUNCTION) and when a byte
 * of the answer last came (header and body), each turn of the loop ends
 * the transfers past their deadline, and the loop sleeps no longer than
 * the soonest deadline.
 */
#include "recover_fetch.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "recover_fetch_int.h"

#define KVR_POLL_MS 1000

typedef struct kvr_cancel {
	struct kvr_cancel *next;
	uint64_t token;
	uint64_t serial_end; /* covers submissions with a smaller serial */
} kvr_cancel;

/* A queued result; r comes first so a kvr_result * is a kvr_rnode *. */
typedef struct kvr_rnode {
	kvr_result r;
	struct kvr_rnode *next;
} kvr_rnode;

struct kvr_fetcher {
	kvr_fetch_opts o; /* defaults filled in */
	CURLM *multi;
	pthread_t thread;
	bool joined; /* stop has run */

	pthread_mutex_t mu;
	/* under mu */
	bool stopping;
	uint64_t next_serial;
	size_t outstanding; /* submitted and not yet finished or cancelled */
	kvr_xfer *wait_head, *wait_tail;
	kvr_cancel *cancels;
	kvr_rnode *res_head, *res_tail;

	/* fetcher thread only */
	kvr_xfer *running;
	int n_running;
};

static pthread_once_t kvr_curl_once = PTHREAD_ONCE_INIT;
static CURLcode kvr_curl_init_rv;

static void
global_init(void)
{
	kvr_curl_init_rv = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- the queues (under f->mu) ---------------------------------------- */

static bool
cancelled_locked(const kvr_fetcher *f, uint64_t token, uint64_t serial)
{
	for (const kvr_cancel *c = f->cancels; c != NULL; c = c->next) {
		if (c->token == token && serial < c->serial_end) {
			return true;
		}
	}
	return false;
}

static void
result_push_locked(kvr_fetcher *f, kvr_rnode *n)
{
	n->next = NULL;
	if (f->res_tail != NULL) {
		f->res_tail->next = n;
	} else {
		f->res_head = n;
	}
	f->res_tail = n;
}

/* finish_xfer queues the result of x unless it was cancelled, frees x,
 * and notifies the owner. */
static void
finish_xfer(kvr_fetcher *f, kvr_xfer *x, CURLcode code)
{
	kvr_rnode *n = kvi_calloc(1, sizeof(*n));
	kvr_xfer_result(x, code, &n->r);
	pthread_mutex_lock(&f->mu);
	bool drop = cancelled_locked(f, x->token, x->serial);
	if (!drop) {
		result_push_locked(f, n);
	}
	f->outstanding--;
	pthread_mutex_unlock(&f->mu);
	kvr_xfer_free(x);
	if (drop) {
		kvr_result_free(&n->r);
	} else if (f->o.notify != NULL) {
		f->o.notify(f->o.arg);
	}
}

/* ---- the fetcher thread ---------------------------------------------- */

static void
running_remove(kvr_fetcher *f, kvr_xfer *x)
{
	for (kvr_xfer **pp = &f->running; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			f->n_running--;
			break;
		}
	}
	curl_multi_remove_handle(f->multi, x->easy);
}

/* apply_cancels_locked aborts the running fetches that recorded
 * cancellations cover, then forgets the cancellations: waiting fetches and
 * results they cover are already gone. */
static void
apply_cancels_locked(kvr_fetcher *f)
{
	kvr_xfer *x = f->running;
	while (x != NULL) {
		kvr_xfer *next = x->next;
		if (cancelled_locked(f, x->token, x->serial)) {
			running_remove(f, x);
			kvr_xfer_free(x);
			f->outstanding--;
		}
		x = next;
	}
	while (f->cancels != NULL) {
		kvr_cancel *c = f->cancels;
		f->cancels = c->next;
		kvi_free(c);
	}
}

/* start_waiting_locked starts waiting fetches while there is room;
 * a fetch that cannot start becomes a result at once. Returns how many
 * results it queued. */
static int
start_waiting_locked(kvr_fetcher *f)
{
	int queued = 0;
	while (f->n_running < f->o.max_concurrent && f->wait_head != NULL) {
		kvr_xfer *x = f->wait_head;
		f->wait_head = x->next;
		if (f->wait_head == NULL) {
			f->wait_tail = NULL;
		}
		x->next = NULL;
		if (kvr_xfer_setup(&f->o, x) != KVI_OK ||
		    curl_multi_add_handle(f->multi, x->easy) != CURLM_OK) {
			kvr_rnode *n = kvi_calloc(1, sizeof(*n));
			kvr_xfer_result(x, CURLE_FAILED_INIT, &n->r);
			result_push_locked(f, n);
			f->outstanding--;
			kvr_xfer_free(x);
			queued++;
			continue;
		}
		x->next = f->running;
		f->running = x;
		f->n_running++;
	}
	return queued;
}

/* collect_done finishes the transfers libcurl reports done and returns
 * how many. */
static int
collect_done(kvr_fetcher *f)
{
	CURLMsg *msg;
	int left, done = 0;
	while ((msg = curl_multi_info_read(f->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE) {
			continue;
		}
		char *priv = NULL;
		CURLcode code = msg->data.result;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		kvr_xfer *x = (kvr_xfer *)priv;
		running_remove(f, x);
		finish_xfer(f, x, code);
		done++;
	}
	return done;
}

/* expire ends the running transfers past their deadline, and returns
 * how long the thread may sleep before the next one passes (at most
 * KVR_POLL_MS). */
static int
expire(kvr_fetcher *f)
{
	int64_t now = kvi_now_ms(), next = now + KVR_POLL_MS;
	kvr_xfer *x = f->running;
	while (x != NULL) {
		kvr_xfer *after = x->next;
		int64_t due = kvr_xfer_due(&f->o, x);
		if (due > now) {
			next = due < next ? due : next;
		} else if (x->heard_ms != 0) {
			kvr_xfer_stop(x, KVI_ETIMEDOUT,
				      "nothing received for %ld ms, after %llu "
				      "bytes of the answer",
				      f->o.idle_ms,
				      (unsigned long long)x->bytes);
		} else {
			kvr_xfer_stop(x, KVI_ETIMEDOUT,
				      "no answer within %ld ms of the request",
				      f->o.first_byte_ms);
		}
		if (due <= now) {
			running_remove(f, x);
			finish_xfer(f, x, CURLE_OPERATION_TIMEDOUT);
		}
		x = after;
	}
	return next - now < 1 ? 1 : (int)(next - now);
}

static void *
fetcher_main(void *arg)
{
	kvr_fetcher *f = arg;
	for (;;) {
		pthread_mutex_lock(&f->mu);
		if (f->stopping) {
			pthread_mutex_unlock(&f->mu);
			break;
		}
		apply_cancels_locked(f);
		int queued = start_waiting_locked(f);
		pthread_mutex_unlock(&f->mu);
		if (queued > 0 && f->o.notify != NULL) {
			f->o.notify(f->o.arg);
		}
		int still;
		curl_multi_perform(f->multi, &still);
		int done = collect_done(f);
		int sleep_ms = expire(f);
		if (done > 0 || f->n_running < f->o.max_concurrent) {
			/* start waiting fetches in the freed slots */
			pthread_mutex_lock(&f->mu);
			bool waiting = f->wait_head != NULL;
			pthread_mutex_unlock(&f->mu);
			if (waiting) {
				continue;
			}
		}
		curl_multi_poll(f->multi, NULL, 0, sleep_ms, NULL);
	}
	while (f->running != NULL) {
		kvr_xfer *x = f->running;
		running_remove(f, x);
		kvr_xfer_free(x);
	}
	return NULL;
}

/* ---- API ------------------------------------------------------------- */

/* opts_fill writes o, its defaults filled in, into out; false for a
 * negative field. */
static bool
opts_fill(const kvr_fetch_opts *o, kvr_fetch_opts *out)
{
	if (o->max_concurrent < 0 || o->timeout_ms < 0 || o->connect_ms < 0 ||
	    o->first_byte_ms < 0 || o->idle_ms < 0) {
		return false;
	}
	*out = *o;
	out->max_concurrent =
	    o->max_concurrent ? o->max_concurrent : KVR_FETCH_CONCURRENT;
	out->timeout_ms = o->timeout_ms ? o->timeout_ms : KVR_FETCH_TIMEOUT_MS;
	out->connect_ms =
	    o->connect_ms ? o->connect_ms : KVR_FETCH_CONNECT_TIMEOUT_MS;
	out->first_byte_ms =
	    o->first_byte_ms ? o->first_byte_ms : KVR_FETCH_FIRST_BYTE_MS;
	out->idle_ms = o->idle_ms ? o->idle_ms : KVR_FETCH_IDLE_MS;
	return true;
}

kvi_err
kvr_fetcher_open(const kvr_fetch_opts *o, kvr_fetcher **out)
{
	kvr_fetch_opts opts;
	if (o == NULL || out == NULL || !opts_fill(o, &opts)) {
		return KVI_EINVAL;
	}
	pthread_once(&kvr_curl_once, global_init);
	if (kvr_curl_init_rv != CURLE_OK) {
		return KVI_EIO;
	}
	kvr_fetcher *f = kvi_calloc(1, sizeof(*f));
	f->o = opts;
	if (pthread_mutex_init(&f->mu, NULL) != 0) {
		kvi_free(f);
		return KVI_EIO;
	}
	f->multi = curl_multi_init();
	if (f->multi == NULL) {
		goto fail;
	}
	/* Idle connections kept for reuse: no more than may run at once. */
	curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS,
			  (long)opts.max_concurrent);
	if (pthread_create(&f->thread, NULL, fetcher_main, f) != 0) {
		goto fail;
	}
	*out = f;
	return KVI_OK;
fail:
	if (f->multi != NULL) {
		curl_multi_cleanup(f->multi);
	}
	pthread_mutex_destroy(&f->mu);
	kvi_free(f);
	return KVI_EIO;
}

kvi_err
kvr_fetcher_submit(kvr_fetcher *f, uint64_t token, const char *url,
		   uint64_t max_blocks)
{
	if (url == NULL || url[0] == '\0') {
		return KVI_EINVAL;
	}
	pthread_mutex_lock(&f->mu);
	if (f->stopping) {
		pthread_mutex_unlock(&f->mu);
		return KVI_ECLOSED;
	}
	if (f->outstanding >= KVR_FETCH_QUEUE_MAX) {
		pthread_mutex_unlock(&f->mu);
		return KVI_EFULL;
	}
	kvr_xfer *x = kvi_calloc(1, sizeof(*x));
	x->token = token;
	x->max_blocks = max_blocks;
	x->serial = f->next_serial++;
	x->url = kvi_strdup(url);
	if (f->wait_tail != NULL) {
		f->wait_tail->next = x;
	} else {
		f->wait_head = x;
	}
	f->wait_tail = x;
	f->outstanding++;
	curl_multi_wakeup(f->multi);
	pthread_mutex_unlock(&f->mu);
	return KVI_OK;
}

void
kvr_fetcher_cancel(kvr_fetcher *f, uint64_t token)
{
	pthread_mutex_lock(&f->mu);
	if (f->stopping) {
		pthread_mutex_unlock(&f->mu);
		return;
	}
	kvr_xfer **xp = &f->wait_head;
	f->wait_tail = NULL;
	while (*xp != NULL) {
		kvr_xfer *x = *xp;
		if (x->token == token) {
			*xp = x->next;
			kvr_xfer_free(x);
			f->outstanding--;
		} else {
			f->wait_tail = x;
			xp = &x->next;
		}
	}
	kvr_rnode **rp = &f->res_head;
	f->res_tail = NULL;
	while (*rp != NULL) {
		kvr_rnode *n = *rp;
		if (n->r.token == token) {
			*rp = n->next;
			kvr_result_free(&n->r);
		} else {
			f->res_tail = n;
			rp = &n->next;
		}
	}
	kvr_cancel *c = kvi_calloc(1, sizeof(*c));
	c->token = token;
	c->serial_end = f->next_serial;
	c->next = f->cancels;
	f->cancels = c;
	curl_multi_wakeup(f->multi);
	pthread_mutex_unlock(&f->mu);
}

kvr_result *
kvr_fetcher_pop(kvr_fetcher *f)
{
	pthread_mutex_lock(&f->mu);
	kvr_rnode *n = f->res_head;
	if (n != NULL) {
		f->res_head = n->next;
		if (f->res_head == NULL) {
			f->res_tail = NULL;
		}
		n->next = NULL;
	}
	pthread_mutex_unlock(&f->mu);
	return n != NULL ? &n->r : NULL;
}

void
kvr_result_free(kvr_result *r)
{
	if (r == NULL) {
		return;
	}
	kvr_parser_free(r->parser);
	kvi_free((kvr_rnode *)r);
}

void
kvr_fetcher_stop(kvr_fetcher *f)
{
	if (f == NULL || f->joined) {
		return;
	}
	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	curl_multi_wakeup(f->multi);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	f->joined = true;
	/* Under mu only for a pop racing this stop. */
	pthread_mutex_lock(&f->mu);
	while (f->wait_head != NULL) {
		kvr_xfer *x = f->wait_head;
		f->wait_head = x->next;
		kvr_xfer_free(x);
	}
	f->wait_tail = NULL;
	while (f->res_head != NULL) {
		kvr_rnode *n = f->res_head;
		f->res_head = n->next;
		kvr_result_free(&n->r);
	}
	f->res_tail = NULL;
	while (f->cancels != NULL) {
		kvr_cancel *c = f->cancels;
		f->cancels = c->next;
		kvi_free(c);
	}
	f->outstanding = 0;
	pthread_mutex_unlock(&f->mu);
	curl_multi_cleanup(f->multi);
	f->multi = NULL;
}

void
kvr_fetcher_free(kvr_fetcher *f)
{
	if (f == NULL) {
		return;
	}
	kvr_fetcher_stop(f);
	pthread_mutex_destroy(&f->mu);
	kvi_free(f);
}
