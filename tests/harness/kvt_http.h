/*
 * kvt_http.h - HTTP and JSON helpers for integration tests (libcurl,
 * jansson).
 *
 * A request returns the status code, the raw body and, when the body is
 * JSON, its parsed value. jansson's integers are signed 64-bit and it
 * rejects larger numbers, while kvindex and the engines write u64 hashes as
 * plain JSON integers: kvt_json_loads therefore turns every unsigned
 * integer literal above INT64_MAX into a decimal string before parsing, and
 * kvt_json_u64 reads a u64 from either form.
 *
 * Each call uses its own curl handle: thread-safe once curl is initialised
 * (done on first use, under a once).
 */
#ifndef KVI_TESTS_KVT_HTTP_H
#define KVI_TESTS_KVT_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct kvt_http_resp {
	long status;
	char *body; /* NUL-terminated */
	size_t len;
	json_t *json;  /* NULL when the body is not JSON */
	char *headers; /* the response's header lines, NUL-terminated */
} kvt_http_resp;

/* kvt_http_get performs a GET of url with a total timeout and fills *out
 * (release with kvt_http_resp_fini, whatever the result: *out is always
 * initialised). Returns KVI_OK for any HTTP status,
 * KVI_ETIMEDOUT, KVI_EUNREACHABLE (connection refused) or KVI_EIO. */
kvi_err kvt_http_get(const char *url, int timeout_ms, kvt_http_resp *out);

/* kvt_http_request sends method ("GET", "POST", "PUT", "DELETE") to url
 * with body (JSON text; NULL: none, or an empty one for POST and PUT)
 * and one extra header line (NULL: none, e.g. "Authorization: Bearer
 * t"). Errors as kvt_http_get. */
kvi_err kvt_http_request(const char *method, const char *url, const char *body,
			 const char *header, int timeout_ms,
			 kvt_http_resp *out);

/* kvt_http_post posts body (JSON text, NULL for an empty body) to url.
 * Errors as kvt_http_get. */
kvi_err kvt_http_post(const char *url, const char *body, int timeout_ms,
		      kvt_http_resp *out);

/* kvt_http_post_bytes posts len bytes of body, of content_type, to url.
 * Errors as kvt_http_get. */
kvi_err kvt_http_post_bytes(const char *url, const void *body, size_t len,
			    const char *content_type, int timeout_ms,
			    kvt_http_resp *out);

/* kvt_http_post_json posts the JSON value body (borrowed). */
kvi_err kvt_http_post_json(const char *url, const json_t *body, int timeout_ms,
			   kvt_http_resp *out);

void kvt_http_resp_fini(kvt_http_resp *r);

/* kvt_http_metric GETs the Prometheus text at url and returns the value of
 * the sample (its name and labels exactly as printed, e.g.
 * "x_total{result=\"ok\"}"), or -1 when it is absent or the GET fails. */
double kvt_http_metric(const char *url, const char *sample);

/* kvt_http_metric_sum GETs the Prometheus text at url once and returns the
 * sum of every sample whose name and labels start with prefix (e.g.
 * "kvindex_shard_listeners{": a family over all its labels); -1 when the
 * page cannot be read. */
double kvt_http_metric_sum(const char *url, const char *prefix);

/* kvt_json_loads parses text (len bytes), unsigned integers above
 * INT64_MAX becoming decimal strings; NULL if it is not JSON. */
json_t *kvt_json_loads(const char *text, size_t len);

/* kvt_json_u64 reads a non-negative integer or a decimal string. */
bool kvt_json_u64(const json_t *v, uint64_t *out);

#endif /* KVI_TESTS_KVT_HTTP_H */
