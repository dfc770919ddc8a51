/*
 * kube_config.h - what the Kubernetes pod watcher (kube_watch.h) is told:
 * the API server, credentials, namespaces, label selector and the
 * defaults every watched pod gets, and how what is not given is found in
 * the environment (in a pod: the service account's token and CA, and the
 * API server's address from KUBERNETES_SERVICE_HOST/PORT).
 */
#ifndef KVI_COORDINATOR_KUBE_CONFIG_H
#define KVI_COORDINATOR_KUBE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "kube_parse.h"

/* Where the in-cluster service account is mounted. */
#define KVC_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct kvc_kube_config {
	const char *api;        /* base URL; NULL: in-cluster */
	const char *token_file; /* NULL: the service account's, if any */
	const char *ca_file;    /* NULL: the service account's, if any */
	const char *const *namespaces;
	size_t n_namespaces;
	const char *label_selector; /* NULL: every pod */
	kvc_kube_defaults defaults;
	int64_t not_ready_grace_ms; /* 0: 30000 */
	int backoff_min_ms;         /* 0: 500 */
	int backoff_max_ms;         /* 0: 30000 */
	int watch_timeout_s;        /* 0: 300..600, random per watch */
	int page_limit;             /* 0: 500 */
} kvc_kube_config;

/* kvc_kube_config_resolve fills what cfg leaves to the environment: with
 * no api, the in-cluster URL from KUBERNETES_SERVICE_HOST/PORT and the
 * service account's token and CA files when they exist. Returns
 * KVI_EINVAL (err says why) when no API server is known, a namespace is
 * not a valid name, or a port or dp size default is out of range. The
 * strings it sets live in bufs. */
typedef struct kvc_kube_bufs {
	char api[300];
	char token[300];
	char ca[300];
} kvc_kube_bufs;
kvi_err kvc_kube_config_resolve(kvc_kube_config *cfg, kvc_kube_bufs *bufs,
				char *err, size_t errlen);

/* kvc_kube_api_resolve is the part of kvc_kube_config_resolve that finds
 * the API server and credentials alone (for the leader-election lease,
 * which needs no namespace to watch). */
kvi_err kvc_kube_api_resolve(kvc_kube_config *cfg, kvc_kube_bufs *bufs,
			     char *err, size_t errlen);

/* kvc_kube_read_token reads the bearer token in path (NULL: none, out is
 * ""), trailing white space removed; false (err says why) when the file
 * cannot be read. Read it again for each request: a projected service
 * account token rotates. */
bool kvc_kube_read_token(const char *path, char *out, size_t len, char *err,
			 size_t errlen);

/* kvc_kube_curl_init initialises libcurl once for the process, for the
 * API clients of the pod watcher and the lease, whichever starts first. */
void kvc_kube_curl_init(void);

#endif /* KVI_COORDINATOR_KUBE_CONFIG_H */
