/*
 * recover_fetch.h - fetching `/kv_recover` bodies over HTTP.
 *
 * A kvr_fetcher runs one thread with one libcurl multi handle. The owner -
 * the shard's ingest thread, an event loop - submits fetches by token (its
 * own id for the request, e.g. the listener's) and URL from any thread. At
 * most max_concurrent fetches run at once; the rest wait, in submission
 * order. Each body is streamed into a kvr_parser as it arrives, so a tens-of
 * -MB tree dump is never held as text: memory is that of the parsed events.
 *
 * Results cross back through a queue: the fetcher thread appends each
 * finished fetch and calls notify(arg), which should do no more than wake
 * the owner (write to an eventfd or a pipe); the owner then calls
 * kvr_fetcher_pop() until it returns NULL. notify runs on the fetcher thread
 * and must not call kvr_fetcher_stop() or kvr_fetcher_free().
 *
 * One fetch is one attempt: a failure is reported, never retried here.
 * Retrying, with backoff, is the decision of the caller's listener state
 * machine, which knows whether the listener still needs the data.
 *
 * Deadlines. An endpoint that accepts and never answers, or answers a
 * byte now and then, must not hold one of the few slots for the whole
 * fetch timeout, or a handful of them starve every healthy listener. So
 * besides the whole fetch's timeout (for a big dump that keeps flowing)
 * each fetch has three short ones: to connect (libcurl's), from the
 * request sent to the first byte of the answer, and between two bytes of
 * it once it began. The fetcher thread keeps the last two itself and
 * wakes for the soonest.
 *
 * What is refused: a 200 whose Content-Type is not JSON (application/json,
 * parameters allowed; an answer without one is parsed, since the parser
 * takes nothing but a well-formed /kv_recover body), and an answer that
 * stores more blocks than the fetch's max_blocks, which is cut off as soon
 * as the parser has counted one too many.
 *
 * Errors in kvr_result.err:
 *   KVI_OK           HTTP 200 and a well-formed body (see recover_parse.h)
 *   KVI_EUNREACHABLE connection refused, or the host could not be resolved
 *   KVI_ETIMEDOUT    one of the deadlines above passed (message: which)
 *   KVI_EPROTO       a malformed body or HTTP response, or a 200 that is
 *                    not JSON
 *   KVI_ETOOBIG      a body longer than KVR_FETCH_BODY_MAX bytes, or one
 *                    storing more than max_blocks blocks
 *   KVI_ENOENT       HTTP 404: the engine has no recovery endpoint
 *   KVI_EAGAIN       HTTP 429, 502, 503, 504
 *   KVI_EIO          any other HTTP status, or a transfer that broke off
 *   KVI_EINVAL       a URL libcurl refuses (only http and https are allowed)
 * with http_status set whenever a response arrived, and a message naming the
 * cause (for a status other than 200, the start of the body).
 *
 * Connections ignore the proxy environment variables: engines are reached
 * on their pod addresses directly.
 *
 * Global state: curl_global_init() is called once per process, by the first
 * kvr_fetcher_open(), and never undone (libcurl requires it to happen
 * before any other thread uses libcurl; it is harmless for other modules
 * that call it too, once they have started after it).
 */
#ifndef KVI_SHARD_RECOVER_FETCH_H
#define KVI_SHARD_RECOVER_FETCH_H

#include <stdint.h>

#include "error.h"
#include "recover_parse.h"

#define KVR_FETCH_TIMEOUT_MS         120000L /* whole fetch, by default */
#define KVR_FETCH_CONNECT_TIMEOUT_MS 3000L
#define KVR_FETCH_FIRST_BYTE_MS      5000L
#define KVR_FETCH_IDLE_MS            5000L
#define KVR_FETCH_CONCURRENT         4
#define KVR_FETCH_BODY_MAX           (UINT64_C(1) << 30)
#define KVR_FETCH_QUEUE_MAX          65536 /* submitted, not yet finished */
#define KVR_FETCH_SNIPPET_MAX        160
#define KVR_FETCH_BLOCKS_ANY         UINT64_MAX /* no max_blocks */

/* How a fetcher fetches; a field left 0 takes its default. */
typedef struct kvr_fetch_opts {
	int max_concurrent; /* fetches at once; KVR_FETCH_CONCURRENT */
	long timeout_ms;    /* a whole fetch; KVR_FETCH_TIMEOUT_MS */
	long connect_ms;    /* to connect; KVR_FETCH_CONNECT_TIMEOUT_MS */
	long first_byte_ms; /* from the request sent to the answer's first
			     * byte; KVR_FETCH_FIRST_BYTE_MS */
	long idle_ms;       /* nothing received, once the answer began;
			     * KVR_FETCH_IDLE_MS */
	void (*notify)(void *arg); /* after each result is queued; NULL */
	void *arg;
} kvr_fetch_opts;

/* The outcome of one fetch. */
typedef struct kvr_result {
	uint64_t token;
	kvi_err err;
	long http_status;    /* 0 when no response arrived */
	uint64_t body_bytes; /* as received (after content decoding) */
	uint64_t blocks;     /* stored blocks parsed (all of them on success) */
	kvr_parser *parser;  /* err == KVI_OK: holds the parsed body (see
			      * kvr_parser_result()); else NULL. Owned by the
			      * result. */
	char message[320];   /* "" when err == KVI_OK */
} kvr_result;

typedef struct kvr_fetcher kvr_fetcher;

/* kvr_fetcher_open makes a fetcher and starts its thread, which fetches
 * as o says.
 * Writes *out only on success. Returns KVI_EINVAL for a negative field,
 * KVI_EIO when libcurl or the thread cannot be set up. */
kvi_err kvr_fetcher_open(const kvr_fetch_opts *o, kvr_fetcher **out);

/* kvr_fetcher_submit queues a GET of url (copied) whose result will carry
 * token; an answer storing more than max_blocks blocks is refused
 * (KVR_FETCH_BLOCKS_ANY: no limit). Thread-safe. Returns KVI_ECLOSED after
 * kvr_fetcher_stop(), KVI_EFULL when KVR_FETCH_QUEUE_MAX fetches are
 * outstanding, KVI_EINVAL for a NULL or empty url. */
kvi_err kvr_fetcher_submit(kvr_fetcher *f, uint64_t token, const char *url,
			   uint64_t max_blocks);

/* kvr_fetcher_cancel drops every fetch submitted with token before this
 * call: waiting ones are forgotten, running ones aborted, and results not
 * yet popped are freed. Thread-safe. A fetch submitted with the same token
 * afterwards is not affected. */
void kvr_fetcher_cancel(kvr_fetcher *f, uint64_t token);

/* kvr_fetcher_pop returns the oldest queued result, which the caller owns
 * and frees with kvr_result_free(), or NULL when there is none.
 * Thread-safe. */
kvr_result *kvr_fetcher_pop(kvr_fetcher *f);

/* kvr_result_free frees r and its parser; NULL is ignored. */
void kvr_result_free(kvr_result *r);

/* kvr_fetcher_stop aborts running fetches, joins the fetcher thread and
 * frees waiting fetches and unpopped results. Idempotent. Must not be called
 * from notify, nor concurrently with kvr_fetcher_free(). */
void kvr_fetcher_stop(kvr_fetcher *f);

/* kvr_fetcher_free stops f if needed and frees it; NULL is ignored. */
void kvr_fetcher_free(kvr_fetcher *f);

#endif /* KVI_SHARD_RECOVER_FETCH_H */
