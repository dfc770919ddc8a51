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
 */
#include "recover_fetch.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

#define KVR_POLL_MS 1000

/* One fetch, waiting or running. */
typedef struct kvr_xfer {
	struct kvr_xfer *next;
	uint64_t token;
	uint64_t serial;
	char *url;
	CURL *easy;
	kvr_parser *parser;
	long status;    /* -1 until the first body byte */
	kvi_err abort;  /* why the write callback stopped the transfer */
	bool cut;       /* stopped after the snippet of an error body */
	uint64_t bytes; /* body bytes received */
	size_t snippet_len;
	char snippet[KVR_FETCH_SNIPPET_MAX];
	char errbuf[CURL_ERROR_SIZE];
} kvr_xfer;

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
	int max_concurrent;
	long timeout_ms;
	void (*notify)(void *arg);
	void *arg;
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
kvr_curl_init(void)
{
	kvr_curl_init_rv = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- transfers ------------------------------------------------------- */

static void
kvr_xfer_free(kvr_xfer *x)
{
	if (x == NULL) {
		return;
	}
	if (x->easy != NULL) {
		curl_easy_cleanup(x->easy);
	}
	kvr_parser_free(x->parser);
	kvi_free(x->url);
	kvi_free(x);
}

/* kvr_xfer_write takes the next piece of the body: a 200 body goes to the
 * parser, any other is kept as a snippet for the message. Returning less
 * than given makes libcurl end the transfer with CURLE_WRITE_ERROR. */
static size_t
kvr_xfer_write(char *data, size_t size, size_t nmemb, void *arg)
{
	kvr_xfer *x = arg;
	size_t n = size * nmemb;
	if (x->status < 0) {
		long status = 0;
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
		x->status = status;
	}
	x->bytes += n;
	if (x->bytes > KVR_FETCH_BODY_MAX) {
		x->abort = KVI_ETOOBIG;
		return 0;
	}
	if (x->status != 200) {
		size_t room = sizeof(x->snippet) - x->snippet_len;
		size_t k = n < room ? n : room;
		memcpy(x->snippet + x->snippet_len, data, k);
		x->snippet_len += k;
		if (x->snippet_len == sizeof(x->snippet)) {
			x->cut = true; /* the rest of an error page is noise */
			return 0;
		}
		return n;
	}
	if (kvr_parser_feed(x->parser, data, n) != KVI_OK) {
		x->abort = KVI_EPROTO;
		return 0;
	}
	return n;
}

/* kvr_xfer_setup prepares x's easy handle. Returns KVI_EIO when libcurl
 * cannot. */
static kvi_err
kvr_xfer_setup(kvr_fetcher *f, kvr_xfer *x)
{
	long connect_ms = KVR_FETCH_CONNECT_TIMEOUT_MS;
	if (connect_ms > f->timeout_ms) {
		connect_ms = f->timeout_ms;
	}
	x->easy = curl_easy_init();
	if (x->easy == NULL) {
		return KVI_EIO;
	}
	x->parser = kvr_parser_alloc();
	x->status = -1;
	CURL *e = x->easy;
	CURLcode rc = CURLE_OK;
	rc |= curl_easy_setopt(e, CURLOPT_URL, x->url);
	rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, kvr_xfer_write);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, f->timeout_ms);
	rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(e, CURLOPT_PROXY, "");
	rc |= curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	rc |= curl_easy_setopt(e, CURLOPT_USERAGENT, "kvindex");
	/* An unknown URL scheme fails at perform time with a message; every
	 * other option only fails on out-of-memory. */
	return rc == CURLE_OK ? KVI_OK : KVI_EIO;
}

/* kvr_curl_err translates a libcurl result. */
static kvi_err
kvr_curl_err(CURLcode code)
{
	switch (code) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return KVI_EUNREACHABLE;
	case CURLE_OPERATION_TIMEDOUT:
		return KVI_ETIMEDOUT;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return KVI_EINVAL;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
		return KVI_EPROTO;
	default:
		return KVI_EIO;
	}
}

static kvi_err
kvr_status_err(long status)
{
	switch (status) {
	case 404:
		return KVI_ENOENT;
	case 429:
	case 502:
	case 503:
	case 504:
		return KVI_EAGAIN;
	default:
		return KVI_EIO;
	}
}

/* kvr_xfer_result turns a finished transfer into a result, moving the
 * parser into it on success. */
static kvr_rnode *
kvr_xfer_result(kvr_xfer *x, CURLcode code)
{
	kvr_rnode *n = kvi_calloc(1, sizeof(*n));
	kvr_result *r = &n->r;
	long status = 0;
	if (x->easy != NULL) {
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	}
	r->token = x->token;
	r->http_status = status;
	r->body_bytes = x->bytes;
	if (code == CURLE_WRITE_ERROR && x->cut) {
		code = CURLE_OK;
	}
	if (code == CURLE_WRITE_ERROR && x->abort != KVI_OK) {
		r->err = x->abort;
		if (x->abort == KVI_EPROTO) {
			snprintf(r->message, sizeof(r->message), "body: %s",
				 kvr_parser_error(x->parser));
		} else {
			snprintf(r->message, sizeof(r->message),
				 "body longer than %llu bytes",
				 (unsigned long long)KVR_FETCH_BODY_MAX);
		}
	} else if (code != CURLE_OK) {
		r->err = kvr_curl_err(code);
		snprintf(r->message, sizeof(r->message), "%s",
			 x->errbuf[0] ? x->errbuf : curl_easy_strerror(code));
	} else if (status != 200) {
		char text[KVR_FETCH_SNIPPET_MAX + 1];
		for (size_t i = 0; i < x->snippet_len; i++) {
			unsigned char c = (unsigned char)x->snippet[i];
			text[i] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
		}
		text[x->snippet_len] = '\0';
		r->err = kvr_status_err(status);
		snprintf(r->message, sizeof(r->message), "HTTP %ld: %s", status,
			 text);
	} else if (kvr_parser_finish(x->parser) != KVI_OK) {
		r->err = KVI_EPROTO;
		snprintf(r->message, sizeof(r->message), "body: %s",
			 kvr_parser_error(x->parser));
	} else {
		r->err = KVI_OK;
		r->parser = x->parser;
		x->parser = NULL;
	}
	return n;
}

/* ---- the queues (under f->mu) ---------------------------------------- */

static bool
kvr_cancelled_locked(const kvr_fetcher *f, uint64_t token, uint64_t serial)
{
	for (const kvr_cancel *c = f->cancels; c != NULL; c = c->next) {
		if (c->token == token && serial < c->serial_end) {
			return true;
		}
	}
	return false;
}

static void
kvr_result_push_locked(kvr_fetcher *f, kvr_rnode *n)
{
	n->next = NULL;
	if (f->res_tail != NULL) {
		f->res_tail->next = n;
	} else {
		f->res_head = n;
	}
	f->res_tail = n;
}

/* kvr_finish_xfer queues the result of x unless it was cancelled, frees x,
 * and notifies the owner. */
static void
kvr_finish_xfer(kvr_fetcher *f, kvr_xfer *x, CURLcode code)
{
	kvr_rnode *n = kvr_xfer_result(x, code);
	pthread_mutex_lock(&f->mu);
	bool drop = kvr_cancelled_locked(f, x->token, x->serial);
	if (!drop) {
		kvr_result_push_locked(f, n);
	}
	f->outstanding--;
	pthread_mutex_unlock(&f->mu);
	kvr_xfer_free(x);
	if (drop) {
		kvr_result_free(&n->r);
	} else if (f->notify != NULL) {
		f->notify(f->arg);
	}
}

/* ---- the fetcher thread ---------------------------------------------- */

static void
kvr_running_remove(kvr_fetcher *f, kvr_xfer *x)
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

/* kvr_apply_cancels_locked aborts the running fetches that recorded
 * cancellations cover, then forgets the cancellations: waiting fetches and
 * results they cover are already gone. */
static void
kvr_apply_cancels_locked(kvr_fetcher *f)
{
	kvr_xfer *x = f->running;
	while (x != NULL) {
		kvr_xfer *next = x->next;
		if (kvr_cancelled_locked(f, x->token, x->serial)) {
			kvr_running_remove(f, x);
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

/* kvr_start_waiting_locked starts waiting fetches while there is room;
 * a fetch that cannot start becomes a result at once. Returns how many
 * results it queued. */
static int
kvr_start_waiting_locked(kvr_fetcher *f)
{
	int queued = 0;
	while (f->n_running < f->max_concurrent && f->wait_head != NULL) {
		kvr_xfer *x = f->wait_head;
		f->wait_head = x->next;
		if (f->wait_head == NULL) {
			f->wait_tail = NULL;
		}
		x->next = NULL;
		if (kvr_xfer_setup(f, x) != KVI_OK ||
		    curl_multi_add_handle(f->multi, x->easy) != CURLM_OK) {
			kvr_rnode *n = kvr_xfer_result(x, CURLE_FAILED_INIT);
			kvr_result_push_locked(f, n);
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

/* kvr_collect_done finishes the transfers libcurl reports done and returns
 * how many. */
static int
kvr_collect_done(kvr_fetcher *f)
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
		kvr_running_remove(f, x);
		kvr_finish_xfer(f, x, code);
		done++;
	}
	return done;
}

static void *
kvr_fetcher_main(void *arg)
{
	kvr_fetcher *f = arg;
	for (;;) {
		pthread_mutex_lock(&f->mu);
		if (f->stopping) {
			pthread_mutex_unlock(&f->mu);
			break;
		}
		kvr_apply_cancels_locked(f);
		int queued = kvr_start_waiting_locked(f);
		pthread_mutex_unlock(&f->mu);
		if (queued > 0 && f->notify != NULL) {
			f->notify(f->arg);
		}
		int still;
		curl_multi_perform(f->multi, &still);
		if (kvr_collect_done(f) > 0) {
			continue; /* start waiting fetches in the freed slots */
		}
		curl_multi_poll(f->multi, NULL, 0, KVR_POLL_MS, NULL);
	}
	while (f->running != NULL) {
		kvr_xfer *x = f->running;
		kvr_running_remove(f, x);
		kvr_xfer_free(x);
	}
	return NULL;
}

/* ---- API ------------------------------------------------------------- */

kvi_err
kvr_fetcher_start(int max_concurrent, long timeout_ms,
		  void (*notify)(void *arg), void *arg, kvr_fetcher **out)
{
	if (max_concurrent < 1 || timeout_ms < 0 || out == NULL) {
		return KVI_EINVAL;
	}
	pthread_once(&kvr_curl_once, kvr_curl_init);
	if (kvr_curl_init_rv != CURLE_OK) {
		return KVI_EIO;
	}
	kvr_fetcher *f = kvi_calloc(1, sizeof(*f));
	f->max_concurrent = max_concurrent;
	f->timeout_ms = timeout_ms ? timeout_ms : KVR_FETCH_TIMEOUT_MS;
	f->notify = notify;
	f->arg = arg;
	if (pthread_mutex_init(&f->mu, NULL) != 0) {
		kvi_free(f);
		return KVI_EIO;
	}
	f->multi = curl_multi_init();
	if (f->multi == NULL) {
		goto fail;
	}
	/* Idle connections kept for reuse: no more than may run at once. */
	curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, (long)max_concurrent);
	if (pthread_create(&f->thread, NULL, kvr_fetcher_main, f) != 0) {
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
kvr_fetcher_submit(kvr_fetcher *f, uint64_t token, const char *url)
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
