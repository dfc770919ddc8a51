/*
 * kvt_kubeapi.h - running the test Kubernetes API server (kvindex-kubeapi)
 * from a test.
 *
 * kvt_kube_start runs the server in a new temporary directory with a port
 * file, a log file and a port of the kernel's choice on a loopback address
 * of its own (kvt_loopback_pick), and waits for the port file (written
 * once it listens). With opts->state the server keeps its pods, uids and
 * resourceVersion in dir/state.json: kvt_kube_restart (after
 * kvt_kube_kill, or on a running server, which it stops first) starts it
 * again on the same address and port with the same state file and token,
 * so that a client sees one API server that went away and came back. On
 * 127.0.0.1, the port (in the kernel's ephemeral range) could meanwhile
 * be the local end of any outgoing connection, held through TIME_WAIT.
 *
 * The control calls (tests/kubeapi/README.md) return KVI_OK for a 2xx
 * answer, KVI_ENOENT for a 404, KVI_EPROTO for any other status and the
 * transport errors of kvt_http_get. The binary's path comes from the
 * test's KVI_KUBEAPI_BIN compile definition.
 *
 * A kvt_kube is used by one thread.
 */
#ifndef KVI_TESTS_KVT_KUBEAPI_H
#define KVI_TESTS_KVT_KUBEAPI_H

#include <jansson.h>
#include <stdbool.h>

#include "error.h"
#include "kvt_env.h"
#include "kvt_http.h"
#include "kvt_proc.h"

typedef struct kvt_kube_opts {
	const char *token; /* required bearer token; NULL: no auth */
	bool state;        /* keep state in dir/state.json across restarts */
	int bookmark_ms;   /* BOOKMARK period; 0: the server's (1000) */
} kvt_kube_opts;

typedef struct kvt_kube {
	char *bin;
	char *dir;        /* temporary directory, removed by kvt_kube_stop */
	char *port_path;  /* dir/port.json */
	char *state_path; /* dir/state.json, NULL without opts.state */
	char *log_path;   /* dir/kubeapi.log: the server's log and output */
	char *token;      /* the token restarts use (kvt_kube_set_token) */
	int bookmark_ms;
	kvt_proc *proc;          /* NULL while not running */
	char host[KVT_HOST_MAX]; /* its loopback address */
	int port;
	char url[64]; /* "http://host:port", the API server's URL */
} kvt_kube;

/* kvt_kube_start starts bin (opts NULL: defaults) and waits up to
 * timeout_ms for its port file. Returns KVI_ETIMEDOUT (read k->log_path),
 * KVI_EPROTO (unreadable port file) or KVI_EIO (it exited, or could not be
 * started). On error the server is
 * stopped but the directory is kept for its log until kvt_kube_stop. */
kvi_err kvt_kube_start(const char *bin, const kvt_kube_opts *opts,
		       int timeout_ms, kvt_kube *k);

/* kvt_kube_stop sends SIGTERM, waits up to 10 s (then SIGKILL), removes
 * the directory and writes the exit status into *status (may be NULL; -1
 * when it was not running). Idempotent. */
void kvt_kube_stop(kvt_kube *k, int *status);

/* kvt_kube_kill SIGKILLs the server; the directory and state stay. */
void kvt_kube_kill(kvt_kube *k);

/* kvt_kube_restart stops the server if it runs (SIGTERM) and starts it
 * again on the same port, state file and token, retrying while the server
 * exits at once (its port still taken). Errors as kvt_kube_start; KVI_EIO
 * when it never stayed up; KVI_EINVAL after kvt_kube_stop. */
kvi_err kvt_kube_restart(kvt_kube *k, int timeout_ms);

/* kvt_kube_request sends method ("GET", "PUT", "POST", "DELETE") to
 * k->url + path with body (borrowed; NULL: none) and, when token is not
 * NULL, "Authorization: Bearer token". Fills *out whatever the status
 * (release with kvt_http_resp_fini). Errors as kvt_http_get. */
kvi_err kvt_kube_request(const kvt_kube *k, const char *method,
			 const char *path, const json_t *body,
			 const char *token, int timeout_ms, kvt_http_resp *out);

/* kvt_kube_put_pod creates or replaces pod ns/name (pod borrowed) and
 * writes the stored pod, with its resourceVersion and uid, into *stored
 * (json_decref; may be NULL). */
kvi_err kvt_kube_put_pod(const kvt_kube *k, const char *ns, const char *name,
			 const json_t *pod, json_t **stored);

/* kvt_kube_delete_pod deletes pod ns/name. Returns KVI_ENOENT if absent. */
kvi_err kvt_kube_delete_pod(const kvt_kube *k, const char *ns,
			    const char *name);

/* kvt_kube_compact forgets the watch history and list snapshots. */
kvi_err kvt_kube_compact(const kvt_kube *k);

/* kvt_kube_drop_watches closes every open watch abruptly. */
kvi_err kvt_kube_drop_watches(const kvt_kube *k);

/* kvt_kube_block_watches makes new watches get 503 (on) or not (off). */
kvi_err kvt_kube_block_watches(const kvt_kube *k, bool on);

/* kvt_kube_set_token changes the required token (NULL or "": none); later
 * restarts use it too. */
kvi_err kvt_kube_set_token(kvt_kube *k, const char *token);

/* kvt_kube_set_chunking sets how watch events are cut into chunks:
 * "line", "split" or "batch". */
kvi_err kvt_kube_set_chunking(const kvt_kube *k, const char *mode);

/* kvt_kube_stats returns GET /control/stats (json_decref), NULL on error. */
json_t *kvt_kube_stats(const kvt_kube *k);

/* kvt_kube_stat returns the integer member key of the stats ("rv" is read
 * from its string), or -1. */
long long kvt_kube_stat(const kvt_kube *k, const char *key);

/* kvt_kube_pod returns a new pod object (json_decref) with status.podIP
 * ip (NULL: none), phase Running, a Ready condition True or False, and
 * the labels and annotations given as NULL-terminated key, value, key,
 * value, ... arrays (NULL: none). */
json_t *kvt_kube_pod(const char *ip, bool ready, const char *const *labels,
		     const char *const *annotations);

/* kvt_kube_pod_terminating sets metadata.deletionTimestamp on pod. */
void kvt_kube_pod_terminating(json_t *pod);

#endif /* KVI_TESTS_KVT_KUBEAPI_H */
