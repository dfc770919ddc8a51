/*
 * ctl_http.h - kvindexctl's HTTP client: one request to the coordinator's
 * API at a time, over libcurl, with the admin token when the command
 * needs it and the redirects of a follower followed to the leader.
 *
 * A follower answers a write (and every /admin path) with 307 and the
 * leader's URL in Location, after checking the token (docs/api.md,
 * "Replicas and redirects"). The client follows it itself rather than
 * through libcurl: the method and the body go again, and so does the
 * token, which libcurl would drop on a redirect to another host or port
 * (ctl_http.c says why that is safe here). A 307 or 308 that cannot be
 * followed (past CTL_HTTP_MAX_HOPS, or to a URL that is not http:// or
 * https://) is returned as the answer.
 *
 * A ctl_http belongs to one thread. Answers are owned by the caller.
 */
#ifndef KVI_TOOLS_CTL_HTTP_H
#define KVI_TOOLS_CTL_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* Redirects followed for one request: a follower names the leader, and a
 * leader that has just stepped down may name the next one. */
#define CTL_HTTP_MAX_HOPS 3

typedef struct ctl_http ctl_http;

/* One answer of the API. */
typedef struct ctl_resp {
	long status;
	char *body; /* NUL-terminated; "" when none */
	size_t len;
	char *next_cursor; /* X-Next-Cursor (GET /workers), or NULL */
	char *location;    /* Location of a redirect not followed, or NULL */
} ctl_resp;

/* ctl_http_alloc returns a client of the API at base ("http://host:port",
 * without a trailing '/'), each request whole within timeout_ms. */
ctl_http *ctl_http_alloc(const char *base, long timeout_ms);
void ctl_http_free(ctl_http *h);

/* ctl_http_base returns the base URL the client was made with. */
const char *ctl_http_base(const ctl_http *h);

/* ctl_http_set_token makes every later request carry
 * "Authorization: Bearer token" (copied; NULL: none). */
void ctl_http_set_token(ctl_http *h, const char *token);

/* ctl_http_call sends method ("GET", "POST", "DELETE") to path (with its
 * query string) on the base URL, with body (JSON text; NULL: none), and
 * fills *out (always initialised; ctl_resp_fini). Returns KVI_OK for any
 * HTTP answer; KVI_EUNREACHABLE when none came (no connection, a
 * time-out, a connection broken or a reply that is not HTTP), with why in
 * err. */
kvi_err ctl_http_call(ctl_http *h, const char *method, const char *path,
		      const char *body, ctl_resp *out, char *err,
		      size_t errlen);

void ctl_resp_fini(ctl_resp *r);

/* ctl_http_escape returns s percent-encoded for a path segment or a query
 * value (everything but letters, digits and "-._~"); kvi_free it. */
char *ctl_http_escape(const char *s);

/* ctl_http_url_ok says whether url is an http:// or https:// URL with a
 * host. */
bool ctl_http_url_ok(const char *url);

#endif /* KVI_TOOLS_CTL_HTTP_H */
