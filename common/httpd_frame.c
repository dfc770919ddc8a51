/*
 * httpd_frame.c - where each request on a connection ends (RFC 9112 6).
 *
 * evhttp (libevent 2.1) reads a request's body by its first Content-Length
 * or by Transfer-Encoding, whichever it meets, and its chunk reader knows
 * no chunk extensions: a valid "5;ext=1" is refused as too large (413), and
 * so is a chunk size that is not a number. So every connection reads
 * through a filter (bufferevent_filter) that frames the requests itself
 * and hands evhttp only requests it reads one way:
 *
 *  - a head without a body, or with one Content-Length (several equal
 *    ones count as one), is passed on as it came, and so is its body;
 *  - a chunked body is read here, extensions and trailers ignored, and
 *    passed on whole, with Content-Length instead of Transfer-Encoding;
 *  - anything else - two lengths that differ, a length beside
 *    Transfer-Encoding, a coding other than chunked, a bad chunk size, a
 *    chunk longer than it said, line folding, a chunked body over the
 *    limit, a body on HEAD or TRACE (after which evhttp reads none, and
 *    would read it as the next request) - is passed on as the head alone,
 *    marked with the status and the reason in KVI_HTTP_FRAME_ERROR_HEADER
 *    and no body, and the rest of the connection is dropped: the loop
 *    answers the mark and closes.
 *
 * A client's own KVI_HTTP_FRAME_ERROR_HEADER is removed. A head longer
 * than its limit is refused too (431), with a request line of the
 * framer's own.
 *
 * Replies: evhttp takes a reply as written once the bufferevent it writes
 * to has an empty output buffer, and may then shut the socket. A filter's
 * buffer empties into the socket's bufferevent, which writes it later, so
 * a reply that ends its connection would be lost. So the filter writes
 * replies to the socket itself; what the socket does not take at once
 * goes to the socket's bufferevent but for its last byte, which stays in
 * the filter's buffer, and is written once the rest is. And a filter
 * writes only while its writing is enabled, which evhttp does after it has
 * put a reply in the buffer, without a write starting: frame_kick writes
 * it then.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "alloc.h"
#include "httpd_frame.h"
#include "httpd_int.h"

#define CHUNK_LINE_MAX 4096
/* the most of a body read at once past libevent's reads: a buffer of it
 * stays under glibc's mmap threshold, so its pages are reused */
#define BODY_READ_MAX (256u << 10)

typedef enum frame_state {
	FR_HEAD,       /* a request's head */
	FR_BODY,       /* left bytes of a Content-Length body */
	FR_CHUNK_SIZE, /* a chunk's size line */
	FR_CHUNK_DATA, /* left bytes of a chunk */
	FR_CHUNK_END,  /* the line end after a chunk */
	FR_TRAILER,    /* trailer lines, up to an empty one */
	FR_DEAD,       /* everything dropped: the connection is ending */
} frame_state;

typedef struct kvi_http_framer {
	frame_state st;
	uint64_t left;
	size_t max_body, max_head;
	size_t trailer; /* bytes of trailer read */
	size_t scan;    /* FR_HEAD: where the head's unfinished line starts */
	struct evbuffer *head;    /* the head to pass on, without its end */
	struct evbuffer *body;    /* the chunked body, read so far */
	struct bufferevent *sock; /* the socket's */
	struct bufferevent *bev;  /* the filter */
	struct event *kick;       /* frame_kick */
} framer;

/* What the head of one request says about its body. */
typedef struct head_info {
	int status; /* 0, or what to answer */
	const char *reason;
	bool chunked, expect_continue, rebuild;
	bool refused; /* set for the second reading: no body goes on */
	bool has_len;
	uint64_t len;
} head_info;

static bool
name_is(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);
	return n == k && evutil_ascii_strncasecmp(line, name, k) == 0;
}

/* value_trim returns the value of a header line after its colon, without
 * the whitespace around it, and its length in *n. */
static const char *
value_trim(const char *v, const char *end, size_t *n)
{
	while (v < end && (*v == ' ' || *v == '\t')) {
		v++;
	}
	while (end > v && (end[-1] == ' ' || end[-1] == '\t')) {
		end--;
	}
	*n = (size_t)(end - v);
	return v;
}

static bool
parse_len(const char *v, size_t n, uint64_t *out)
{
	if (n == 0 || n > 19) {
		return false;
	}
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9') {
			return false;
		}
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = x;
	return true;
}

static void
head_fail(head_info *hi, int status, const char *reason)
{
	if (hi->status == 0) {
		hi->status = status;
		hi->reason = reason;
	}
}

/* head_line reads one header line (n bytes, no line end) into hi and says
 * whether it is passed on when the head is rebuilt; hi->chunked is known
 * by then, from a first reading. */
static bool
head_line(head_info *hi, const char *line, size_t n, bool first_reading)
{
	if (n > 0 && (line[0] == ' ' || line[0] == '\t')) {
		/* RFC 9112 5.2: obsolete line folding, refused */
		head_fail(hi, 400, "header line folding is not accepted");
		return false;
	}
	const char *colon = memchr(line, ':', n);
	if (colon == NULL) {
		return true; /* evhttp refuses it */
	}
	size_t kn = (size_t)(colon - line), vn;
	const char *v = value_trim(colon + 1, line + n, &vn);
	if (name_is(line, kn, KVI_HTTP_FRAME_ERROR_HEADER)) {
		hi->rebuild = true;
		return false;
	}
	if (name_is(line, kn, "Transfer-Encoding")) {
		if (first_reading &&
		    (hi->chunked || vn != 7 ||
		     evutil_ascii_strncasecmp(v, "chunked", 7) != 0)) {
			head_fail(hi, 501,
				  "Transfer-Encoding other than chunked");
		}
		hi->chunked = true;
		return false;
	}
	if (name_is(line, kn, "Content-Length")) {
		uint64_t len = 0;
		if (!parse_len(v, vn, &len)) {
			head_fail(hi, 400, "Content-Length is not one number");
		} else if (hi->has_len && len != hi->len) {
			head_fail(hi, 400,
				  "two Content-Length headers that differ");
		}
		hi->has_len = true;
		hi->len = len;
		return !hi->refused;
	}
	if (name_is(line, kn, "Expect") && vn == 12 &&
	    evutil_ascii_strncasecmp(v, "100-continue", 12) == 0) {
		hi->expect_continue = true;
		return !hi->chunked; /* a chunked body goes on whole */
	}
	return true;
}

/* head_lines reads the lines of the head in text (len bytes) into hi and,
 * when keep is not NULL, adds the ones to pass on to it. */
static void
head_lines(head_info *hi, const char *text, size_t len, struct evbuffer *keep)
{
	const char *p = text, *end = text + len;
	bool first = true;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl != NULL ? nl : end;
		size_t n = (size_t)(le - p);
		if (n > 0 && p[n - 1] == '\r') {
			n--;
		}
		if (n == 0 && !first) {
			break;
		}
		bool pass = first || head_line(hi, p, n, keep == NULL);
		if (pass && keep != NULL) {
			evbuffer_add(keep, p, n);
			evbuffer_add(keep, "\r\n", 2);
		}
		first = false;
		p = nl != NULL ? nl + 1 : end;
	}
}

/* head_read parses the head in text (len bytes, its empty last line
 * included) into hi and, when it is to be rebuilt, puts the lines to pass
 * on into keep. */
static void
head_read(head_info *hi, const char *text, size_t len, struct evbuffer *keep)
{
	head_lines(hi, text, len, NULL);
	if (hi->chunked && hi->has_len) {
		head_fail(hi, 400, "both Content-Length and Transfer-Encoding");
	}
	/* evhttp reads no body after these: it would take one for the next
	 * request */
	bool bodiless = (len >= 5 && memcmp(text, "HEAD ", 5) == 0) ||
			(len >= 6 && memcmp(text, "TRACE ", 6) == 0);
	if (bodiless && (hi->chunked || (hi->has_len && hi->len > 0))) {
		head_fail(hi, 400, "a body on a HEAD or TRACE request");
	}
	if (hi->chunked || hi->rebuild || hi->status != 0) {
		head_info again = {.chunked = hi->chunked,
				   .refused = hi->status != 0};
		head_lines(&again, text, len, keep);
		hi->rebuild = true;
	}
}

/* head_end returns the length of the head at the start of src, its empty
 * last line included, or 0 while it has not all come. It goes on from
 * where it stopped the last time (f->scan), so a head that comes a byte at
 * a time is read once. */
static size_t
head_end(framer *f, struct evbuffer *src)
{
	struct evbuffer_ptr p;
	if (evbuffer_ptr_set(src, &p, f->scan, EVBUFFER_PTR_SET) != 0) {
		return 0;
	}
	for (;;) {
		size_t eol;
		struct evbuffer_ptr e =
		    evbuffer_search_eol(src, &p, &eol, EVBUFFER_EOL_CRLF);
		if (e.pos < 0) {
			return 0;
		}
		if ((size_t)e.pos == f->scan && f->scan > 0) {
			size_t len = (size_t)e.pos + eol;
			f->scan = 0;
			return len;
		}
		f->scan = (size_t)e.pos + eol;
		if (evbuffer_ptr_set(src, &p, f->scan, EVBUFFER_PTR_SET) != 0) {
			return 0;
		}
	}
}

/* frame_refuse passes on the head in f->head marked with status and
 * reason, and drops the rest of the connection. */
static void
frame_refuse(framer *f, struct evbuffer *src, struct evbuffer *dst, int status,
	     const char *reason)
{
	evbuffer_add_buffer(dst, f->head);
	evbuffer_add_printf(dst, "%s: %d %s\r\nContent-Length: 0\r\n\r\n",
			    KVI_HTTP_FRAME_ERROR_HEADER, status, reason);
	evbuffer_drain(f->body, evbuffer_get_length(f->body));
	evbuffer_drain(src, evbuffer_get_length(src));
	f->st = FR_DEAD;
}

/* frame_head moves the head at the start of src on, and sets what follows
 * it. Returns false while it has not all come. */
static bool
frame_head(framer *f, struct evbuffer *src, struct evbuffer *dst)
{
	/* RFC 9112 2.2: empty lines before a request are ignored */
	while (f->scan == 0) {
		unsigned char c[2];
		ev_ssize_t n = evbuffer_copyout(src, c, 2);
		if (n >= 1 && c[0] == '\n') {
			evbuffer_drain(src, 1);
		} else if (n == 2 && c[0] == '\r' && c[1] == '\n') {
			evbuffer_drain(src, 2);
		} else {
			break;
		}
	}
	size_t len = head_end(f, src);
	if ((len == 0 && evbuffer_get_length(src) > f->max_head) ||
	    len > f->max_head) {
		/* what evhttp is handed must be read here first: a request
		 * line of ours carries the mark */
		evbuffer_drain(f->head, evbuffer_get_length(f->head));
		evbuffer_add_printf(f->head, "GET / HTTP/1.1\r\n");
		f->scan = 0;
		frame_refuse(f, src, dst, 431, "request head too large");
		return true;
	}
	if (len == 0) {
		return false;
	}
	head_info hi = {0};
	const char *text = (const char *)evbuffer_pullup(src, (ev_ssize_t)len);
	evbuffer_drain(f->head, evbuffer_get_length(f->head));
	head_read(&hi, text, len, f->head);
	if (hi.status != 0) {
		evbuffer_drain(src, len);
		frame_refuse(f, src, dst, hi.status, hi.reason);
		return true;
	}
	if (hi.chunked) {
		evbuffer_drain(src, len);
		if (hi.expect_continue && evbuffer_get_length(src) == 0) {
			static const char cont[] =
			    "HTTP/1.1 100 Continue\r\n\r\n";
			if (f->sock != NULL) {
				bufferevent_write(f->sock, cont,
						  sizeof(cont) - 1);
			}
		}
		f->st = FR_CHUNK_SIZE;
		return true;
	}
	if (hi.rebuild) {
		evbuffer_drain(src, len);
		evbuffer_add_buffer(dst, f->head);
		evbuffer_add(dst, "\r\n", 2);
	} else {
		evbuffer_drain(f->head, evbuffer_get_length(f->head));
		evbuffer_remove_buffer(src, dst, len);
	}
	f->left = hi.has_len ? hi.len : 0;
	f->st = f->left > 0 ? FR_BODY : FR_HEAD;
	return true;
}

/* chunk_size parses a chunk-size line (n bytes, no line end): hex digits,
 * then nothing but whitespace or extensions. */
static bool
chunk_size(const char *line, size_t n, uint64_t *out)
{
	size_t i = 0;
	uint64_t x = 0;
	for (; i < n; i++) {
		char c = line[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0) {
			break;
		}
		if (x >> 60 != 0) {
			return false;
		}
		x = x << 4 | (uint64_t)d;
	}
	if (i == 0) {
		return false;
	}
	while (i < n && (line[i] == ' ' || line[i] == '\t')) {
		i++;
	}
	if (i < n && line[i] != ';') {
		return false;
	}
	*out = x;
	return true;
}

/* frame_line takes the next line of src (at most CHUNK_LINE_MAX bytes)
 * into buf without its end. Returns its length, -1 while it has not come,
 * -2 when it is too long. */
static ev_ssize_t
frame_line(struct evbuffer *src, char *buf)
{
	size_t n;
	char *line = evbuffer_readln(src, &n, EVBUFFER_EOL_CRLF);
	if (line == NULL) {
		return evbuffer_get_length(src) > CHUNK_LINE_MAX ? -2 : -1;
	}
	if (n > CHUNK_LINE_MAX) {
		free(line);
		return -2;
	}
	memcpy(buf, line, n);
	free(line);
	return (ev_ssize_t)n;
}

/* frame_read_rest reads what the socket already holds of the f->left
 * bytes still to come of a body into to, in one read: libevent 2.1 reads a
 * socket 4 KiB at a time (EVBUFFER_MAX_READ), each read a pass through
 * this filter and evhttp, so a 100 KB body took 25 reads and as many
 * FIONREAD calls. Called only when every byte read before is consumed,
 * so the bytes stay in order; the socket's bufferevent reads the rest,
 * and sees the end of the stream or an error, as before. */
static void
frame_read_rest(framer *f, struct evbuffer *to)
{
	if (f->sock == NULL) {
		return; /* kvi_http_framer_feed: no socket */
	}
	size_t want = f->left < BODY_READ_MAX ? (size_t)f->left : BODY_READ_MAX;
	struct evbuffer_iovec v[2];
	int nv = evbuffer_reserve_space(to, (ev_ssize_t)want, v, 2);
	if (nv <= 0) {
		return;
	}
	struct iovec io[2];
	size_t room = want;
	for (int i = 0; i < nv; i++) {
		io[i].iov_base = v[i].iov_base;
		io[i].iov_len = v[i].iov_len < room ? v[i].iov_len : room;
		room -= io[i].iov_len;
	}
	ssize_t n = readv(bufferevent_getfd(f->sock), io, nv);
	size_t got = n > 0 ? (size_t)n : 0;
	int used = 0;
	for (int i = 0; i < nv && got > 0; i++, used++) {
		v[i].iov_len = got < io[i].iov_len ? got : io[i].iov_len;
		got -= v[i].iov_len;
	}
	evbuffer_commit_space(to, v, used);
	if (n > 0) {
		f->left -= (uint64_t)n;
	}
}

/* frame_step moves src on by one state. Returns false when it needs more
 * of src to go on. */
static bool
frame_step(framer *f, struct evbuffer *src, struct evbuffer *dst)
{
	size_t have = evbuffer_get_length(src);
	char line[CHUNK_LINE_MAX];
	ev_ssize_t n;
	uint64_t size;
	switch (f->st) {
	case FR_HEAD:
		return have > 0 && frame_head(f, src, dst);
	case FR_BODY:
	case FR_CHUNK_DATA: {
		size_t take = have < f->left ? have : (size_t)f->left;
		if (take == 0) {
			return false;
		}
		struct evbuffer *to = f->st == FR_BODY ? dst : f->body;
		evbuffer_remove_buffer(src, to, take);
		f->left -= take;
		if (f->left > 0 && evbuffer_get_length(src) == 0) {
			frame_read_rest(f, to);
		}
		if (f->left == 0) {
			f->st = f->st == FR_BODY ? FR_HEAD : FR_CHUNK_END;
		}
		return true;
	}
	case FR_CHUNK_SIZE:
		n = frame_line(src, line);
		if (n == -1) {
			return false;
		}
		if (n == -2 || !chunk_size(line, (size_t)n, &size)) {
			frame_refuse(f, src, dst, 400, "bad chunk size");
			return true;
		}
		if (size > f->max_body - evbuffer_get_length(f->body)) {
			frame_refuse(f, src, dst, 413,
				     "request body too large");
			return true;
		}
		f->left = size;
		f->trailer = 0;
		f->st = size > 0 ? FR_CHUNK_DATA : FR_TRAILER;
		return true;
	case FR_CHUNK_END:
		n = frame_line(src, line);
		if (n == -1) {
			return false;
		}
		if (n != 0) {
			frame_refuse(f, src, dst, 400,
				     "chunk longer than its size");
			return true;
		}
		f->st = FR_CHUNK_SIZE;
		return true;
	case FR_TRAILER:
		n = frame_line(src, line);
		if (n == -1) {
			return false;
		}
		f->trailer += n < 0 ? CHUNK_LINE_MAX : (size_t)n + 2;
		if (n < 0 || f->trailer > f->max_head) {
			frame_refuse(f, src, dst, 400, "trailer too long");
			return true;
		}
		if (n > 0) {
			return true; /* trailers are not used */
		}
		evbuffer_add_buffer(dst, f->head);
		evbuffer_add_printf(dst, "Content-Length: %zu\r\n\r\n",
				    evbuffer_get_length(f->body));
		evbuffer_add_buffer(dst, f->body);
		f->st = FR_HEAD;
		return true;
	case FR_DEAD:
		evbuffer_drain(src, have);
		return false;
	}
	return false;
}

static enum bufferevent_filter_result
frame_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
	 enum bufferevent_flush_mode mode, void *arg)
{
	(void)limit;
	(void)mode;
	framer *f = arg;
	size_t before = evbuffer_get_length(src);
	while (frame_step(f, src, dst)) {
	}
	return evbuffer_get_length(src) < before ? BEV_OK : BEV_NEED_MORE;
}

/* frame_kick writes what evhttp left in the filter's buffer while its
 * writing was disabled: the filter writes only once it is enabled, and
 * enabling it does not start a write. */
static void
frame_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	framer *f = arg;
	bufferevent_flush(f->bev, EV_WRITE, BEV_FLUSH);
}

static void
frame_added(struct evbuffer *out, const struct evbuffer_cb_info *info,
	    void *arg)
{
	(void)out;
	framer *f = arg;
	if (info->n_added > 0 &&
	    !(bufferevent_get_enabled(f->bev) & EV_WRITE)) {
		event_active(f->kick, EV_TIMEOUT, 1);
	}
}

/* frame_out writes a reply in src to the socket (see the top). */
static enum bufferevent_filter_result
frame_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
	  enum bufferevent_flush_mode mode, void *arg)
{
	(void)limit;
	(void)mode;
	framer *f = arg;
	size_t before = evbuffer_get_length(src);
	if (before > 0 && evbuffer_get_length(dst) == 0) {
		int n = evbuffer_write(src, bufferevent_getfd(f->sock));
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			/* the client is gone: nothing to keep */
			evbuffer_drain(src, evbuffer_get_length(src));
		}
	}
	size_t left = evbuffer_get_length(src);
	if (left > 1) {
		evbuffer_remove_buffer(src, dst, left - 1);
	} else if (left == 1 && evbuffer_get_length(dst) == 0) {
		/* the socket took all but the last byte and nothing is left
		 * to tell us when it takes more */
		static const struct timeval soon = {0, 1000};
		event_add(f->kick, &soon);
	}
	return evbuffer_get_length(src) < before ? BEV_OK : BEV_NEED_MORE;
}

static void
frame_free(void *arg)
{
	framer *f = arg;
	if (f->kick != NULL) {
		event_free(f->kick);
	}
	evbuffer_free(f->head);
	evbuffer_free(f->body);
	kvi_free(f);
}

kvi_http_framer *
kvi_http_framer_new(size_t max_body, size_t max_head)
{
	framer *f = kvi_calloc(1, sizeof(*f));
	f->max_body = max_body > 0 ? max_body : SIZE_MAX;
	f->max_head = max_head;
	f->head = evbuffer_new();
	f->body = evbuffer_new();
	if (f->head == NULL || f->body == NULL) {
		kvi_oom(sizeof(*f));
	}
	return f;
}

void
kvi_http_framer_feed(kvi_http_framer *f, struct evbuffer *src,
		     struct evbuffer *dst)
{
	frame_in(src, dst, -1, BEV_NORMAL, f);
}

void
kvi_http_framer_free(kvi_http_framer *f)
{
	if (f != NULL) {
		frame_free(f);
	}
}

struct bufferevent *
kvi_http_framed_new(struct event_base *base, size_t max_body, size_t max_head)
{
	struct bufferevent *sock =
	    bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (sock == NULL) {
		return NULL;
	}
	framer *f = kvi_http_framer_new(max_body, max_head);
	f->sock = sock;
	struct bufferevent *bev = bufferevent_filter_new(
	    sock, frame_in, frame_out, BEV_OPT_CLOSE_ON_FREE, frame_free, f);
	if (bev == NULL) {
		frame_free(f);
		bufferevent_free(sock);
		return NULL;
	}
	f->bev = bev;
	f->kick = event_new(base, -1, 0, frame_kick, f);
	if (f->kick == NULL || evbuffer_add_cb(bufferevent_get_output(bev),
					       frame_added, f) == NULL) {
		bufferevent_free(bev); /* frees f */
		return NULL;
	}
	return bev;
}

const char *
kvi_http_frame_error(struct evhttp_request *ev, int *status)
{
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(ev),
					   KVI_HTTP_FRAME_ERROR_HEADER);
	if (v == NULL || strlen(v) < 5) {
		return NULL;
	}
	*status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
	return v + 4;
}
