/*
 * kube_http.h - the HTTP front of kvindex-kubeapi: the pod API of a
 * Kubernetes API server (core v1, read-only) and the test-only control
 * API, on one libevent evhttp server.
 *
 * Routing, authentication (a bearer token for every /api request when one
 * is set), Status replies and query parsing live in kube_http.c; the pod
 * API in kube_api.c; the control API in kube_control.c (README.md lists
 * both). The server listens to the store: every change is published to the
 * open watches and, with a state file, saved.
 *
 * Single-threaded: everything runs on the event loop that owns base. The
 * server borrows base and the store.
 */
#ifndef KVI_KUBEAPI_KUBE_HTTP_H
#define KVI_KUBEAPI_KUBE_HTTP_H

#include "error.h"
#include "kube_store.h"

struct event_base;

typedef struct kube_http_config {
	const char *token;      /* required bearer token; NULL: none */
	const char *state_path; /* saved after every change; NULL: none */
	int bookmark_ms;        /* BOOKMARK period of watches */
} kube_http_config;

typedef struct kube_http kube_http;

/* kube_http_alloc returns a server over store, not yet listening. */
kube_http *kube_http_alloc(struct event_base *base, kube_store *store,
			   const kube_http_config *cfg);

/* kube_http_bind listens on host:port (0 = ephemeral) and writes the bound
 * port into *bound. Returns KVI_EIO. */
kvi_err kube_http_bind(kube_http *h, const char *host, int port, int *bound);

/* kube_http_free closes every connection, watches included, without
 * writing to them, and frees the server. */
void kube_http_free(kube_http *h);

#endif /* KVI_KUBEAPI_KUBE_HTTP_H */
