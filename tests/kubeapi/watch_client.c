#include "watch_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"

#define MAX_LINES 4096

typedef enum phase {
	PH_HEADERS,   /* status line and headers */
	PH_SIZE,      /* a chunk-size line */
	PH_DATA,      /* chunk data, chunk_left bytes to go */
	PH_DATA_CRLF, /* the CRLF after chunk data */
	PH_TRAILER,   /* after the last chunk: trailers, then CRLF */
	PH_BODY,      /* a body that is not chunked */
	PH_DONE,
} phase;

struct watch_client {
	int fd;
	int status;
	char *headers;
	char value[512]; /* the last header value returned */
	phase ph;
	long long body_left; /* PH_BODY; -1: until the connection closes */
	char *in;            /* received bytes not yet parsed */
	size_t in_len;
	size_t chunk_left;
	watch_chunk cur;
	char *line; /* the line being assembled */
	size_t line_len;
	char *lines[MAX_LINES]; /* complete lines, FIFO */
	size_t head;
	size_t tail;
	watch_chunk chunks[WATCH_CLIENT_MAX_CHUNKS];
	size_t nchunks;
	bool ended;
	bool cut;
	bool eof;
	int bad;
};

static long long
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
line_add(watch_client *c, const char *p, size_t n)
{
	c->line = kvi_realloc(c->line, c->line_len + n + 1);
	memcpy(c->line + c->line_len, p, n);
	c->line_len += n;
	c->line[c->line_len] = '\0';
}

static void
line_push(watch_client *c)
{
	if (c->tail - c->head < MAX_LINES) {
		c->lines[c->tail++ % MAX_LINES] =
		    c->line != NULL ? c->line : kvi_strdup("");
	} else {
		kvi_free(c->line);
	}
	c->line = NULL;
	c->line_len = 0;
}

/* body_data splits stream data into lines. */
static void
body_data(watch_client *c, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			line_push(c);
		} else {
			line_add(c, p + i, 1);
		}
	}
}

static void
consume(watch_client *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

/* crlf returns the index of the first CRLF in the input, or -1. */
static long
crlf(const watch_client *c)
{
	for (size_t i = 0; i + 1 < c->in_len; i++) {
		if (c->in[i] == '\r' && c->in[i + 1] == '\n') {
			return (long)i;
		}
	}
	return -1;
}

static bool
parse_headers(watch_client *c)
{
	char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
	if (end == NULL) {
		return false;
	}
	size_t n = (size_t)(end - c->in) + 4;
	c->headers = kvi_strndup(c->in, n);
	consume(c, n);
	if (sscanf(c->headers, "HTTP/1.%*d %d", &c->status) != 1) {
		c->status = -1;
	}
	const char *te = watch_client_header(c, "Transfer-Encoding");
	const char *cl = watch_client_header(c, "Content-Length");
	if (te != NULL && strncasecmp(te, "chunked", 7) == 0) {
		c->ph = PH_SIZE;
	} else {
		c->ph = PH_BODY;
		c->body_left = cl != NULL ? atoll(cl) : -1;
	}
	return true;
}

/* step parses what it can of the input; returns false when it needs more
 * bytes. */
static bool
step(watch_client *c)
{
	long at;
	size_t n;
	switch (c->ph) {
	case PH_HEADERS:
		return parse_headers(c);
	case PH_SIZE:
		if ((at = crlf(c)) < 0) {
			return false;
		}
		c->chunk_left = strtoul(c->in, NULL, 16);
		consume(c, (size_t)at + 2);
		c->cur = (watch_chunk){0};
		c->ph = c->chunk_left == 0 ? PH_TRAILER : PH_DATA;
		return true;
	case PH_DATA:
		n = c->in_len < c->chunk_left ? c->in_len : c->chunk_left;
		if (n == 0) {
			return false;
		}
		for (size_t i = 0; i < n; i++) {
			c->cur.newlines += c->in[i] == '\n';
		}
		c->cur.len += n;
		c->cur.ends_line = c->in[n - 1] == '\n';
		body_data(c, c->in, n);
		consume(c, n);
		c->chunk_left -= n;
		if (c->chunk_left == 0) {
			if (c->nchunks < WATCH_CLIENT_MAX_CHUNKS) {
				c->chunks[c->nchunks++] = c->cur;
			}
			c->ph = PH_DATA_CRLF;
		}
		return true;
	case PH_DATA_CRLF:
		if (c->in_len < 2) {
			return false;
		}
		consume(c, 2);
		c->ph = PH_SIZE;
		return true;
	case PH_TRAILER:
		if ((at = crlf(c)) < 0) {
			return false;
		}
		consume(c, (size_t)at + 2);
		if (at == 0) {
			c->ended = true;
			c->ph = PH_DONE;
		}
		return true;
	case PH_BODY:
		n = c->in_len;
		if (c->body_left >= 0 && (long long)n > c->body_left) {
			n = (size_t)c->body_left;
		}
		line_add(c, c->in, n);
		consume(c, n);
		if (c->body_left >= 0) {
			c->body_left -= (long long)n;
			if (c->body_left == 0) {
				line_push(c);
				c->ended = true;
				c->ph = PH_DONE;
				return true;
			}
		}
		return false;
	case PH_DONE:
		return false;
	}
	return false;
}

/* read_more waits up to timeout_ms for bytes and parses them; false on
 * timeout or end of the connection. */
static bool
read_more(watch_client *c, int timeout_ms)
{
	if (c->eof) {
		return false;
	}
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	int r = poll(&p, 1, timeout_ms < 0 ? 0 : timeout_ms);
	if (r <= 0) {
		return false;
	}
	char buf[16384];
	ssize_t got = read(c->fd, buf, sizeof(buf));
	if (got <= 0) {
		c->eof = true;
		if (c->ph == PH_BODY && c->body_left < 0) {
			line_push(c);
			c->ended = true;
			c->ph = PH_DONE;
		}
		c->cut = !c->ended;
		return false;
	}
	c->in = kvi_realloc(c->in, c->in_len + (size_t)got);
	memcpy(c->in + c->in_len, buf, (size_t)got);
	c->in_len += (size_t)got;
	while (step(c)) {
	}
	return true;
}

kvi_err
watch_client_open(const char *host, int port, const char *path,
		  const char *token, int timeout_ms, watch_client **out)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		return KVI_EINVAL;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0) {
			close(fd);
		}
		return KVI_EUNREACHABLE;
	}
	char req[2048], auth[600] = "";
	if (token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n",
			 token);
	}
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: %s:%d\r\n"
			 "Accept: application/json\r\n%s\r\n",
			 path, host, port, auth);
	if (n < 0 || (size_t)n >= sizeof(req) ||
	    write(fd, req, (size_t)n) != n) {
		close(fd);
		return KVI_EIO;
	}
	watch_client *c = kvi_calloc(1, sizeof(*c));
	c->fd = fd;
	long long deadline = now_ms() + timeout_ms;
	while (c->ph == PH_HEADERS) {
		if (!read_more(c, (int)(deadline - now_ms()))) {
			kvi_err rv = c->eof ? KVI_EPROTO : KVI_ETIMEDOUT;
			watch_client_close(c);
			return rv;
		}
	}
	*out = c;
	return KVI_OK;
}

int
watch_client_status(const watch_client *c)
{
	return c->status;
}

const char *
watch_client_header(const watch_client *c, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = c->headers; p != NULL && *p != '\0';) {
		const char *eol = strstr(p, "\r\n");
		if (eol == NULL || eol == p) {
			break;
		}
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1;
			while (*v == ' ') {
				v++;
			}
			watch_client *w = (watch_client *)c;
			snprintf(w->value, sizeof(w->value), "%.*s",
				 (int)(eol - v), v);
			return w->value;
		}
		p = eol + 2;
	}
	return NULL;
}

json_t *
watch_client_next(watch_client *c, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	for (;;) {
		if (c->head < c->tail) {
			char *line = c->lines[c->head++ % MAX_LINES];
			json_t *v = json_loads(line, 0, NULL);
			c->bad += v == NULL;
			kvi_free(line);
			return v;
		}
		if (c->ended || c->eof ||
		    !read_more(c, (int)(deadline - now_ms()))) {
			if (c->head < c->tail) {
				continue;
			}
			return NULL;
		}
	}
}

bool
watch_client_wait_end(watch_client *c, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	while (!c->ended && !c->eof && now_ms() < deadline) {
		read_more(c, (int)(deadline - now_ms()));
	}
	while (c->head < c->tail) {
		kvi_free(c->lines[c->head++ % MAX_LINES]);
	}
	return c->ended || c->eof;
}

bool
watch_client_ended(const watch_client *c)
{
	return c->ended;
}

bool
watch_client_cut(const watch_client *c)
{
	return c->cut;
}

int
watch_client_bad_lines(const watch_client *c)
{
	return c->bad;
}

const watch_chunk *
watch_client_chunks(const watch_client *c, size_t *n)
{
	*n = c->nchunks;
	return c->chunks;
}

void
watch_client_close(watch_client *c)
{
	if (c == NULL) {
		return;
	}
	close(c->fd);
	while (c->head < c->tail) {
		kvi_free(c->lines[c->head++ % MAX_LINES]);
	}
	kvi_free(c->headers);
	kvi_free(c->in);
	kvi_free(c->line);
	kvi_free(c);
}
