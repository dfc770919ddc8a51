/*
 * fuzz_http_frame.c - libFuzzer target for the HTTP server's request
 * framer (common/httpd_frame.c).
 *
 * The input's first 8 bytes seed the sizes of the pieces the rest is cut
 * into, as a connection would receive it; the pieces are fed to the framer
 * one after another. What it passed on is then read the way evhttp reads
 * it, and must be what the framer promises evhttp: whole heads no longer
 * than its limit (and what it adds), none with Transfer-Encoding or a
 * folded line, every Content-Length of a
 * head the same number, and one that is marked refused has Content-Length
 * 0 and is the last thing passed on; a HEAD or TRACE request carries no
 * body. Built as a libFuzzer binary with -DKVI_FUZZ=ON (clang), and as a
 * corpus replayer (replay_main.c) in every build.
 */
#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httpd_frame.h"

#define MAX_BODY 4096
#define MAX_HEAD 2048

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
name_is(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);
	return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

/* check_head reads the head at p (up to end) into *head_len (its empty
 * last line included), *body_len and *refused; aborts on anything the
 * framer must not pass on. */
static void
check_head(const char *p, const char *end, size_t *head_len, uint64_t *body_len,
	   bool *refused)
{
	const char *start = p;
	bool first = true, has_len = false;
	uint64_t len = 0;
	*refused = false;
	for (;;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL || nl - start > MAX_HEAD + 256) {
			abort(); /* a head cut short, or too long */
		}
		size_t n = (size_t)(nl - p);
		if (n > 0 && p[n - 1] == '\r') {
			n--;
		}
		if (n == 0) {
			if (first) {
				abort(); /* empty lines are dropped */
			}
			p = nl + 1;
			break;
		}
		if (!first) {
			if (p[0] == ' ' || p[0] == '\t' ||
			    name_is(p, n, "Transfer-Encoding")) {
				abort();
			}
			if (name_is(p, n, KVI_HTTP_FRAME_ERROR_HEADER)) {
				*refused = true;
			}
			if (name_is(p, n, "Content-Length")) {
				const char *v = p + 15;
				const char *ve = p + n;
				while (v < ve && (*v == ' ' || *v == '\t')) {
					v++;
				}
				uint64_t x = 0;
				for (; v < ve && *v >= '0' && *v <= '9'; v++) {
					x = x * 10 + (uint64_t)(*v - '0');
				}
				if (has_len && x != len) {
					abort();
				}
				has_len = true;
				len = x;
			}
		}
		first = false;
		p = nl + 1;
	}
	if (*refused && len != 0) {
		abort();
	}
	bool bodiless =
	    strncmp(start, "HEAD ", 5) == 0 || strncmp(start, "TRACE ", 6) == 0;
	if (bodiless && len > 0) {
		abort();
	}
	*head_len = (size_t)(p - start);
	*body_len = len;
}

static void
check_stream(const char *s, size_t n)
{
	const char *p = s, *end = s + n;
	while (p < end) {
		size_t head;
		uint64_t body;
		bool refused;
		check_head(p, end, &head, &body, &refused);
		p += head;
		if (refused && p != end) {
			abort(); /* nothing after a refused request */
		}
		/* a body may be cut where the input ended */
		p += body < (uint64_t)(end - p) ? body : (uint64_t)(end - p);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8) {
		return 0;
	}
	uint64_t seed;
	memcpy(&seed, data, 8);
	seed |= 1;
	data += 8;
	size -= 8;
	kvi_http_framer *f = kvi_http_framer_new(MAX_BODY, MAX_HEAD);
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	for (size_t off = 0; off < size;) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		size_t piece = seed % 4 == 0 ? 1 + seed % 1024 : 1 + seed % 16;
		if (piece > size - off) {
			piece = size - off;
		}
		evbuffer_add(src, data + off, piece);
		off += piece;
		kvi_http_framer_feed(f, src, dst);
	}
	size_t n = evbuffer_get_length(dst);
	check_stream((const char *)evbuffer_pullup(dst, -1), n);
	evbuffer_free(src);
	evbuffer_free(dst);
	kvi_http_framer_free(f);
	return 0;
}
