/*
 * httpd.h - a small multi-threaded HTTP/1.1 server on libevent's evhttp.
 *
 * Design. kvi_httpd_start() runs `threads` loop threads, each with its own
 * event_base and evhttp accepting on a listening socket of its own, all
 * bound to the same address with SO_REUSEPORT, so the kernel spreads new
 * connections evenly over the loops (by their addresses), and a connection
 * stays on the loop that accepted it. Every reply turns Nagle's algorithm
 * off on its connection. Routes are
 * registered before start and never change afterwards, so loops read them
 * without locks. Every request is dispatched on its loop thread: the server
 * matches the route (exact paths first, then the longest prefix), answers
 * 404 and 405 itself with a JSON error, and calls the handler.
 *
 * Replies. A handler either replies before it returns, or keeps `req` and
 * replies later from any thread - the coordinator's handlers fan a query out
 * to the shards and answer when they have. A reply made off the loop thread
 * is put on the loop's queue and the loop is woken through an eventfd; only
 * the loop thread ever touches evhttp. Exactly one kvi_http_reply*() call
 * ends every request; it releases req, which must not be used afterwards.
 *
 * Ownership of a request. kvi_http_req belongs to the handler while it runs
 * and then to whoever the handler hands it to; one thread at a time uses it.
 * Its accessors and strings stay valid until the reply, whatever happens to
 * the connection meanwhile: if the client goes away before a deferred reply,
 * that reply is dropped, and if the server is stopped first, the request is
 * an orphan whose reply (still required, to free it) is dropped too, even
 * after kvi_httpd_free().
 *
 * Limits. A body larger than max_body is answered 413 by evhttp (its own
 * small HTML page; the connection is closed) and the handler is not called.
 * The server reads and drops the rest of such a body before answering, so
 * that the client sees the 413 rather than a reset; a client that sent
 * "Expect: 100-continue" therefore gets it after its own expect timeout
 * (curl: 1 s). Headers past 64 KiB are answered 400, and so is a request
 * that gives a header twice that it may give once (Authorization: which
 * of two a handler would read is up to the parser), without calling the
 * handler. A connection idle or
 * stalled for timeout_s is closed. Out of descriptors, accepting pauses
 * for a moment rather than spin, and each loop's one reserve descriptor
 * is given up to accept and answer a few waiting connections: the health
 * path 200, anything else 503 with Retry-After.
 *
 * Stop. kvi_httpd_stop() closes the listening socket, then gives deferred
 * requests up to drain_ms to be answered and written (a reply whose write
 * fails keeps the loop waiting until drain_ms); requests that arrive
 * meanwhile on open connections get 503, and every reply while draining
 * carries "Connection: close". Then it joins the loops and closes every
 * connection. It must not be called from a handler.
 *
 * Threads. A handler runs on a loop thread and should not block it: work
 * that waits goes elsewhere and replies later. Loop threads block
 * asynchronous signals, so a write to a vanished peer fails with EPIPE
 * instead of raising SIGPIPE. kvi_httpd_route*, start, stop and free are
 * called by the thread that owns the server; kvi_httpd_port() after a
 * successful start by any thread; the request functions as described above.
 */
#ifndef KVI_COMMON_HTTPD_H
#define KVI_COMMON_HTTPD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KVI_HTTPD_DEFAULT_MAX_BODY  ((size_t)8 << 20)
#define KVI_HTTPD_DEFAULT_TIMEOUT_S 60
#define KVI_HTTPD_MAX_THREADS       64

typedef struct kvi_httpd_config {
	size_t max_body; /* request body limit in bytes; 0: 8 MiB */
	int timeout_s;   /* idle/read/write timeout per connection, and the
			  * time a whole request may take to arrive after the
			  * connection opened or its previous reply, however
			  * slowly it drips (then it is closed); 0: 60 */
	int drain_ms;    /* how long stop waits for deferred replies; 0: none */
	int max_conns;   /* open connections per loop thread; past them a new
			  * one is answered 503 and closed; 0: no limit */
	const char *health_path; /* answered 200 even when the process is
				  * out of descriptors; NULL: "/health" */
	/* local_free, when set, frees what the application kept in a loop's
	 * local slot (kvi_http_req_local): called once per loop whose slot
	 * is set, once its thread has stopped and before its event base is
	 * freed, with local_arg. Replies made from it are dropped. */
	void (*local_free)(void *local_arg, void *local);
	void *local_arg;
} kvi_httpd_config;

/* What a server refused or ended, since it started, and what it has open. */
typedef struct kvi_httpd_stats {
	uint64_t accept_pauses;   /* accept() failed: accepting paused */
	uint64_t refused;         /* connections past max_conns, answered 503 */
	uint64_t timed_out;       /* connections closed for a late request */
	uint64_t reserve_answers; /* connections answered from the reserve
				   * descriptor while out of descriptors */
	uint64_t open;            /* connections open now */
	uint64_t reserve_busy;    /* loops answering from their reserve now */
} kvi_httpd_stats;

typedef struct kvi_httpd kvi_httpd;
typedef struct kvi_http_req kvi_http_req;

/* A handler; arg is what the route was registered with. */
typedef void (*kvi_http_handler)(void *arg, kvi_http_req *req);

/* kvi_httpd_alloc returns a server with no routes, not yet listening;
 * cfg NULL means the defaults. Aborts on out-of-memory. */
kvi_httpd *kvi_httpd_alloc(const kvi_httpd_config *cfg);

/* kvi_httpd_free stops h if it runs and frees it. Requests still deferred
 * become orphans (see above). NULL is ignored. */
void kvi_httpd_free(kvi_httpd *h);

/* kvi_httpd_route routes requests whose path is exactly path (compared
 * before percent-decoding, without the query string) and whose method is
 * method ("GET", "POST", ...; NULL for any; a GET route also takes HEAD,
 * answered without its body) to fn(arg, req).
 * Returns KVI_EINVAL when path does not start with '/' or h has started,
 * KVI_EEXIST when the same method and path are already routed. */
kvi_err kvi_httpd_route(kvi_httpd *h, const char *method, const char *path,
			kvi_http_handler fn, void *arg);

/* kvi_httpd_route_prefix does the same for every path that starts with
 * prefix ("/admin/listeners/"); kvi_http_req_suffix() gives the rest. An
 * exact route wins over a prefix route, a longer prefix over a shorter one.
 * Errors as kvi_httpd_route. */
kvi_err kvi_httpd_route_prefix(kvi_httpd *h, const char *method,
			       const char *prefix, kvi_http_handler fn,
			       void *arg);

/* kvi_httpd_start binds host_port ("127.0.0.1:8080", "[::1]:0", ":8080" or
 * "*:8080" for every address; port 0 picks a free port) and starts threads
 * loop threads (1..KVI_HTTPD_MAX_THREADS). A server starts once.
 * Returns KVI_EINVAL for a bad address or thread count or a second start,
 * KVI_EIO when the socket cannot be bound or a loop cannot be set up; err
 * (errlen bytes, may be NULL) then says why. */
kvi_err kvi_httpd_start(kvi_httpd *h, const char *host_port, int threads,
			char *err, size_t errlen);

/* kvi_httpd_port returns the bound port, 0 before a successful start. */
uint16_t kvi_httpd_port(const kvi_httpd *h);

/* kvi_httpd_accept_pauses returns how many times a loop stopped accepting
 * for a moment because accept() failed (out of descriptors): the server
 * then serves what it has instead of spinning on the listening socket.
 * Any thread, after a successful start. */
uint64_t kvi_httpd_accept_pauses(const kvi_httpd *h);

/* kvi_httpd_stats_get sums the loops' figures (zero before start). Any
 * thread. */
void kvi_httpd_stats_get(const kvi_httpd *h, kvi_httpd_stats *out);

/* kvi_httpd_stop drains, closes and joins as described above. It is
 * idempotent, and a no-op on a server that never started or on NULL. */
void kvi_httpd_stop(kvi_httpd *h);

/*
 * Requests. The strings returned are NUL-terminated and valid until the
 * reply.
 */

/* kvi_http_req_local returns the slot the application keeps per loop
 * thread (NULL until it sets it), and in *base the loop's event_base, for
 * events of its own on that loop: a handler's work that waits on sockets
 * can stay on the loop thread, its callbacks run there, and a reply made
 * there is written at once. Only the loop thread may use either; the slot
 * is freed by cfg.local_free. */
struct event_base;
void **kvi_http_req_local(kvi_http_req *req, struct event_base **base);

/* kvi_http_req_method returns "GET", "POST", "PUT", "DELETE", "HEAD",
 * "OPTIONS", "TRACE", "CONNECT" or "PATCH". */
const char *kvi_http_req_method(const kvi_http_req *req);

/* kvi_http_req_path returns the path as the client sent it, still
 * percent-encoded, without the query string. */
const char *kvi_http_req_path(const kvi_http_req *req);

/* kvi_http_req_suffix returns what follows the prefix of a prefix route in
 * the path (percent-encoded; see kvi_http_unescape), "" for an exact
 * route. */
const char *kvi_http_req_suffix(const kvi_http_req *req);

/* kvi_http_req_query returns the decoded value of the first query-string
 * parameter called name ("" for "?name" or "?name="), or NULL. */
const char *kvi_http_req_query(kvi_http_req *req, const char *name);

/* kvi_http_req_params returns the query string's parameters in their
 * order, decoded, as name, value, name, value ... and writes their number
 * to *n; valid until the reply. */
const char *const *kvi_http_req_params(kvi_http_req *req, size_t *n);

/* kvi_http_req_header returns the value of request header name (matched
 * case-insensitively; the first, when a header that may be repeated is),
 * or NULL. */
const char *kvi_http_req_header(const kvi_http_req *req, const char *name);

/* kvi_http_req_body returns the request body, contiguous and followed by
 * a NUL, and writes its length to *len; a request without a body gives ""
 * and 0. Only a route's handler, on its loop thread, may ask for it, and
 * the body is valid until the handler returns (the loop's buffer holds
 * it, and the next request's body after it). */
const void *kvi_http_req_body(kvi_http_req *req, size_t *len);

/* kvi_http_req_body_len returns the length of the request body. */
size_t kvi_http_req_body_len(const kvi_http_req *req);

/* kvi_http_req_body_copy copies the request body, kvi_http_req_body_len
 * bytes, to dst, without making it contiguous first: a handler that
 * wants the bytes in its own array pays one copy. Same thread rule as
 * kvi_http_req_body. */
void kvi_http_req_body_copy(const kvi_http_req *req, void *dst);

/*
 * Replies. Each of kvi_http_reply, kvi_http_reply_json and
 * kvi_http_reply_error ends req and may be called from any thread. A status
 * outside 100..599 is sent as 500.
 */

/* kvi_http_reply_header adds a response header to the coming reply.
 * Returns KVI_EINVAL when name is not an HTTP token or value holds CR, LF
 * or other control characters. */
kvi_err kvi_http_reply_header(kvi_http_req *req, const char *name,
			      const char *value);

/* kvi_http_reply sends len bytes of body (copied; may be NULL when len is
 * 0) with the given Content-Type (NULL: application/octet-stream, or none
 * for an empty body). */
void kvi_http_reply(kvi_http_req *req, int status, const char *content_type,
		    const void *body, size_t len);

/* kvi_http_reply_take is kvi_http_reply without the copy: it takes body
 * (from kvi_malloc; freed with kvi_free once sent or dropped). */
void kvi_http_reply_take(kvi_http_req *req, int status,
			 const char *content_type, char *body, size_t len);

/* kvi_http_reply_json sends body as compact JSON, application/json. It
 * takes the reference to body; NULL sends "null". */
void kvi_http_reply_json(kvi_http_req *req, int status, json_t *body);

/* kvi_http_reply_error sends {"error": "<message>"} as JSON. */
void kvi_http_reply_error(kvi_http_req *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* kvi_http_unescape percent-decodes s[0..len) into out, which must hold
 * len + 1 bytes, NUL-terminates it and writes the decoded length to
 * *out_len. '+' is kept (path semantics). Returns KVI_EPROTO for a '%' not
 * followed by two hex digits or an encoded NUL; out is then unspecified. */
kvi_err kvi_http_unescape(const char *s, size_t len, char *out,
			  size_t *out_len);

#endif /* KVI_COMMON_HTTPD_H */
