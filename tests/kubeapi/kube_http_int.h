/*
 * kube_http_int.h - what kube_http.c, kube_api.c and kube_control.c share:
 * the server's state, reply helpers and the query-string parser.
 *
 * Query strings are decoded the way the real (Go) server decodes them:
 * "+" is a space, %XX a byte, and the first of repeated keys wins.
 */
#ifndef KVI_KUBEAPI_KUBE_HTTP_INT_H
#define KVI_KUBEAPI_KUBE_HTTP_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube_http.h"
#include "kube_store.h"
#include "kube_watch.h"

struct evhttp;
struct evhttp_request;

#define KUBE_HTTP_TIMEOUT_S 60
#define KUBE_MAX_BODY       (8u << 20)
#define KUBE_MAX_SEGMENTS   8

/* Leases (kube_lease.c). */
typedef struct kube_leases kube_leases;
kube_leases *kube_leases_alloc(void);
void kube_leases_free(kube_leases *l);
/* kube_leases_set_down makes the lease API answer 503 (true) or not. */
void kube_leases_set_down(kube_leases *l, bool down);
/* kube_leases_set_races makes the next n updates of a Lease find it
 * written by someone else since they read it: 409 Conflict. */
void kube_leases_set_races(kube_leases *l, uint64_t n);
/* kube_leases_stats: {"leases", "updates", "conflicts", "down"}. */
json_t *kube_leases_stats(const kube_leases *l);

struct kube_http {
	struct event_base *base;
	kube_leases *leases;
	struct evhttp *http;
	kube_store *store;
	kube_watch_hub *hub;
	char *state_path;
	char *token; /* NULL: no authentication */
	bool block_watches;
	uint64_t lists;
	uint64_t unauthorized;
	uint64_t gone; /* 410s of lists; the hub counts those of watches */
};

typedef struct kube_query {
	size_t n;
	char **keys;
	char **values;
} kube_query;

/* kube_query_parse decodes raw ("a=b&c=d", NULL ok) into q. */
void kube_query_parse(const char *raw, kube_query *q);
/* kube_query_get returns the first value of key, or NULL. */
const char *kube_query_get(const kube_query *q, const char *key);
void kube_query_fini(kube_query *q);

/* kube_path_split splits path on "/" into at most KUBE_MAX_SEGMENTS
 * decoded segments (kvi_free each) and returns their number, or -1 when
 * there are more. */
int kube_path_split(const char *path, char **segs);
void kube_path_free(char **segs, int n);

/* kube_reply_json sends v (taken) with status code. */
void kube_reply_json(struct evhttp_request *req, int code, json_t *v);

/* kube_status returns a new metav1.Status failure object. */
json_t *kube_status(int code, const char *reason, const char *message);

/* kube_reply_status sends kube_status(code, reason, message). */
void kube_reply_status(struct evhttp_request *req, int code, const char *reason,
		       const char *message);

/* kube_request_json parses the request body: an empty body is {}; NULL
 * when it is not JSON. */
json_t *kube_request_json(struct evhttp_request *req);

/* kube_pod_out returns the pod as the API shows it alone: a new object
 * with kind and apiVersion first. */
json_t *kube_pod_out(const json_t *pod);

/* kube_api_handle answers a request under /api (authenticated already);
 * kube_control_handle one under /control/. segs are the path's segments. */
void kube_api_handle(kube_http *h, struct evhttp_request *req, char **segs,
		     int n, const kube_query *q);
/* kube_lease_handle answers a request under /apis (authenticated
 * already). */
void kube_lease_handle(kube_http *h, struct evhttp_request *req, char **segs,
		       int n);
void kube_control_handle(kube_http *h, struct evhttp_request *req, char **segs,
			 int n);

#endif /* KVI_KUBEAPI_KUBE_HTTP_INT_H */
