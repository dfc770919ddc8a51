/*
 * httpd_frame.h - the HTTP server's request framer (httpd_frame.c says
 * what it does and why). The server reads every connection through it
 * (kvi_http_framed_new, in httpd_int.h); the framer alone, without a
 * connection, is here for tests and fuzzing.
 */
#ifndef KVI_COMMON_HTTPD_FRAME_H
#define KVI_COMMON_HTTPD_FRAME_H

#include <event2/buffer.h>
#include <stddef.h>

/* The header, "status reason", a request the framer refused is passed on
 * with (and no body); a client's own is removed. */
#define KVI_HTTP_FRAME_ERROR_HEADER "X-Kvindex-Framing-Error"

typedef struct kvi_http_framer kvi_http_framer;

/* kvi_http_framer_new returns a framer whose chunked bodies may not decode
 * to more than max_body bytes (0: no limit) and which refuses heads (and
 * trailers) longer than max_head. */
kvi_http_framer *kvi_http_framer_new(size_t max_body, size_t max_head);

/* kvi_http_framer_feed moves what it can of src, the bytes a connection
 * received, to dst as evhttp is handed them; what it cannot frame yet
 * stays in src for the next call. */
void kvi_http_framer_feed(kvi_http_framer *f, struct evbuffer *src,
			  struct evbuffer *dst);

void kvi_http_framer_free(kvi_http_framer *f);

#endif /* KVI_COMMON_HTTPD_FRAME_H */
