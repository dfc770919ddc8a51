/*
 * watch_client.h - a raw HTTP/1.1 client for watch streams, for the
 * self-test of kvindex-kubeapi.
 *
 * libcurl hides the chunked framing, but the self-test must see it: that
 * an event is one chunk, or is split across two, or shares a chunk with
 * the next one; and whether a stream ended with the terminating chunk or
 * was cut. So this client speaks HTTP over a plain socket: it sends one
 * GET, reads the status and headers, then decodes chunks as they arrive,
 * recording each chunk's size and newlines, and hands out complete event
 * lines as parsed JSON.
 *
 * Blocking with deadlines (poll); one client per stream, one thread.
 */
#ifndef KVI_KUBEAPI_WATCH_CLIENT_H
#define KVI_KUBEAPI_WATCH_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define WATCH_CLIENT_MAX_CHUNKS 4096

typedef struct watch_chunk {
	size_t len;
	int newlines;
	bool ends_line; /* the chunk's last byte is '\n' */
} watch_chunk;

typedef struct watch_client watch_client;

/* watch_client_open connects to host:port (an IPv4 address), sends GET
 * path (with "Authorization: Bearer token" unless token is NULL) and
 * reads the status line and headers within timeout_ms. Returns
 * KVI_EINVAL (host is not one), KVI_EUNREACHABLE, KVI_ETIMEDOUT or
 * KVI_EPROTO. */
kvi_err watch_client_open(const char *host, int port, const char *path,
			  const char *token, int timeout_ms,
			  watch_client **out);

int watch_client_status(const watch_client *c);

/* watch_client_header returns the value of a response header (case-
 * insensitive name; valid until the next call), or NULL. */
const char *watch_client_header(const watch_client *c, const char *name);

/* watch_client_next returns the next event line as JSON (json_decref)
 * within timeout_ms, or NULL on timeout, at the end of the stream, or for
 * a line that is not JSON (then watch_client_bad_lines counts it). For a
 * reply that is not chunked, the whole body is one "line". */
json_t *watch_client_next(watch_client *c, int timeout_ms);

/* watch_client_wait_end reads (dropping lines) until the stream ends or
 * timeout_ms passes; returns whether it ended. */
bool watch_client_wait_end(watch_client *c, int timeout_ms);

/* Whether the terminating chunk was read (a clean end), and whether the
 * connection closed before it (a cut stream). */
bool watch_client_ended(const watch_client *c);
bool watch_client_cut(const watch_client *c);

int watch_client_bad_lines(const watch_client *c);

/* watch_client_chunks returns the data chunks read so far and their
 * number in *n. */
const watch_chunk *watch_client_chunks(const watch_client *c, size_t *n);

void watch_client_close(watch_client *c);

#endif /* KVI_KUBEAPI_WATCH_CLIENT_H */
