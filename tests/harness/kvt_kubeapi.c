#include "kvt_kubeapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "kvt_env.h"

#define MAX_ARGS     24
#define STOP_TIMEOUT 10000
#define HTTP_TIMEOUT 10000
#define POLL_MS      5

/* ---- process -------------------------------------------------------- */

static kvi_err
read_port_file(kvt_kube *k)
{
	json_t *v = json_load_file(k->port_path, 0, NULL);
	json_t *port = json_object_get(v, "port");
	kvi_err rv = KVI_EPROTO;
	if (json_is_integer(port) && json_integer_value(port) > 0) {
		k->port = (int)json_integer_value(port);
		snprintf(k->url, sizeof(k->url), "http://%s:%d", k->host,
			 k->port);
		rv = KVI_OK;
	}
	json_decref(v);
	return rv;
}

/* launch runs the server on k->host and k->port (0: the kernel's choice)
 * and waits for its port file, or for its early exit (a port still taken
 * on restart). */
static kvi_err
launch(kvt_kube *k, int timeout_ms)
{
	char http[64], bookmark[24];
	snprintf(http, sizeof(http), "%s:%d", k->host, k->port);
	snprintf(bookmark, sizeof(bookmark), "%d", k->bookmark_ms);
	const char *argv[MAX_ARGS] = {
	    k->bin,        "--http",      http,
	    "--port-file", k->port_path,  "--log-file",
	    k->log_path,   "--log-level", "debug"};
	size_t n = 9;
	if (k->token != NULL) {
		argv[n++] = "--token";
		argv[n++] = k->token;
	}
	if (k->state_path != NULL) {
		argv[n++] = "--state";
		argv[n++] = k->state_path;
	}
	if (k->bookmark_ms > 0) {
		argv[n++] = "--bookmark-ms";
		argv[n++] = bookmark;
	}
	argv[n] = NULL;
	unlink(k->port_path);
	kvi_err rv = kvt_proc_start(argv, k->log_path, &k->proc);
	if (rv != KVI_OK) {
		return rv;
	}
	int64_t deadline = kvt_now_ms() + timeout_ms;
	while (access(k->port_path, F_OK) != 0) {
		if (!kvt_proc_alive(k->proc)) {
			rv = KVI_EIO;
			break;
		}
		if (kvt_now_ms() >= deadline) {
			rv = KVI_ETIMEDOUT;
			break;
		}
		kvt_sleep_ms(POLL_MS);
	}
	if (rv == KVI_OK) {
		rv = read_port_file(k);
	}
	if (rv != KVI_OK) {
		kvt_proc_stop(k->proc, STOP_TIMEOUT, NULL);
		kvt_proc_free(k->proc);
		k->proc = NULL;
	}
	return rv;
}

kvi_err
kvt_kube_start(const char *bin, const kvt_kube_opts *opts, int timeout_ms,
	       kvt_kube *k)
{
	memset(k, 0, sizeof(*k));
	kvi_err rv = kvt_tmpdir_make("kvi-kubeapi", &k->dir);
	if (rv != KVI_OK) {
		return rv;
	}
	k->bin = kvi_strdup(bin);
	kvt_loopback_pick(k->host, sizeof(k->host));
	k->port_path = kvt_path(k->dir, "port.json");
	k->log_path = kvt_path(k->dir, "kubeapi.log");
	if (opts != NULL && opts->state) {
		k->state_path = kvt_path(k->dir, "state.json");
	}
	if (opts != NULL && opts->token != NULL && *opts->token != '\0') {
		k->token = kvi_strdup(opts->token);
	}
	k->bookmark_ms = opts != NULL ? opts->bookmark_ms : 0;
	return launch(k, timeout_ms);
}

static void
terminate(kvt_kube *k, int *status)
{
	int st = -1;
	if (k->proc != NULL) {
		kvt_proc_stop(k->proc, STOP_TIMEOUT, &st);
		kvt_proc_free(k->proc);
		k->proc = NULL;
	}
	if (status != NULL) {
		*status = st;
	}
}

void
kvt_kube_stop(kvt_kube *k, int *status)
{
	terminate(k, status);
	if (k->dir != NULL) {
		kvt_tmpdir_remove(k->dir);
	}
	kvi_free(k->bin);
	kvi_free(k->dir);
	kvi_free(k->port_path);
	kvi_free(k->state_path);
	kvi_free(k->log_path);
	kvi_free(k->token);
	k->bin = k->dir = k->port_path = k->state_path = k->log_path = NULL;
	k->token = NULL;
}

void
kvt_kube_kill(kvt_kube *k)
{
	if (k->proc != NULL) {
		kvt_proc_kill(k->proc);
		kvt_proc_free(k->proc);
		k->proc = NULL;
	}
}

kvi_err
kvt_kube_restart(kvt_kube *k, int timeout_ms)
{
	if (k->dir == NULL) {
		return KVI_EINVAL;
	}
	terminate(k, NULL);
	/* The old listening socket is closed, and its connections' ends
	 * left in TIME_WAIT do not keep the server from binding again
	 * (SO_REUSEADDR); retry briefly in case. */
	int64_t deadline = kvt_now_ms() + timeout_ms;
	kvi_err rv;
	for (;;) {
		rv = launch(k, (int)(deadline - kvt_now_ms()));
		if (rv != KVI_EIO || kvt_now_ms() >= deadline) {
			break;
		}
		kvt_sleep_ms(50);
	}
	return rv;
}

/* ---- HTTP ----------------------------------------------------------- */

kvi_err
kvt_kube_request(const kvt_kube *k, const char *method, const char *path,
		 const json_t *body, const char *token, int timeout_ms,
		 kvt_http_resp *out)
{
	char url[1024], auth[512];
	snprintf(url, sizeof(url), "%s%s", k->url, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
		 token != NULL ? token : "");
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
	kvi_err rv = kvt_http_request(
	    method, url, text, token != NULL ? auth : NULL, timeout_ms, out);
	free(text); /* allocated by jansson */
	return rv;
}

/* control sends a control call and maps the status; *reply (may be NULL)
 * gets the JSON answer of a 2xx. */
static kvi_err
control(const kvt_kube *k, const char *method, const char *path,
	const json_t *body, json_t **reply)
{
	kvt_http_resp r;
	kvi_err rv =
	    kvt_kube_request(k, method, path, body, NULL, HTTP_TIMEOUT, &r);
	if (rv == KVI_OK && r.status == 404) {
		rv = KVI_ENOENT;
	} else if (rv == KVI_OK && (r.status < 200 || r.status >= 300)) {
		rv = KVI_EPROTO;
	}
	if (rv == KVI_OK && reply != NULL) {
		*reply = json_incref(r.json);
	}
	kvt_http_resp_fini(&r);
	return rv;
}

static kvi_err
control_pack(const kvt_kube *k, const char *method, const char *path,
	     json_t *body)
{
	kvi_err rv = control(k, method, path, body, NULL);
	json_decref(body);
	return rv;
}

kvi_err
kvt_kube_put_pod(const kvt_kube *k, const char *ns, const char *name,
		 const json_t *pod, json_t **stored)
{
	char path[600];
	snprintf(path, sizeof(path), "/control/pods/%s/%s", ns, name);
	return control(k, "PUT", path, pod, stored);
}

kvi_err
kvt_kube_delete_pod(const kvt_kube *k, const char *ns, const char *name)
{
	char path[600];
	snprintf(path, sizeof(path), "/control/pods/%s/%s", ns, name);
	return control(k, "DELETE", path, NULL, NULL);
}

kvi_err
kvt_kube_compact(const kvt_kube *k)
{
	return control(k, "POST", "/control/compact", NULL, NULL);
}

kvi_err
kvt_kube_drop_watches(const kvt_kube *k)
{
	return control(k, "POST", "/control/drop-watches", NULL, NULL);
}

kvi_err
kvt_kube_block_watches(const kvt_kube *k, bool on)
{
	return control_pack(k, "POST", "/control/block-watches",
			    json_pack("{s:b}", "on", on));
}

kvi_err
kvt_kube_set_token(kvt_kube *k, const char *token)
{
	bool none = token == NULL || *token == '\0';
	kvi_err rv = control_pack(k, "PUT", "/control/token",
				  json_pack("{s:s?}", "token", token));
	if (rv == KVI_OK) {
		kvi_free(k->token);
		k->token = none ? NULL : kvi_strdup(token);
	}
	return rv;
}

kvi_err
kvt_kube_set_chunking(const kvt_kube *k, const char *mode)
{
	return control_pack(k, "POST", "/control/chunking",
			    json_pack("{s:s}", "mode", mode));
}

json_t *
kvt_kube_stats(const kvt_kube *k)
{
	json_t *v = NULL;
	if (control(k, "GET", "/control/stats", NULL, &v) != KVI_OK) {
		json_decref(v);
		return NULL;
	}
	return v;
}

long long
kvt_kube_stat(const kvt_kube *k, const char *key)
{
	json_t *st = kvt_kube_stats(k);
	json_t *v = json_object_get(st, key);
	long long r = -1;
	if (json_is_integer(v)) {
		r = json_integer_value(v);
	} else if (json_is_string(v)) {
		r = strtoll(json_string_value(v), NULL, 10);
	}
	json_decref(st);
	return r;
}

/* ---- pods ----------------------------------------------------------- */

static json_t *
pairs(const char *const *kv)
{
	json_t *o = json_object();
	for (size_t i = 0; kv != NULL && kv[i] != NULL && kv[i + 1] != NULL;
	     i += 2) {
		json_object_set_new(o, kv[i], json_string(kv[i + 1]));
	}
	return o;
}

json_t *
kvt_kube_pod(const char *ip, bool ready, const char *const *labels,
	     const char *const *annotations)
{
	json_t *status =
	    json_pack("{s:s,s:[{s:s,s:s}]}", "phase", "Running", "conditions",
		      "type", "Ready", "status", ready ? "True" : "False");
	if (ip != NULL) {
		json_object_set_new(status, "podIP", json_string(ip));
	}
	return json_pack("{s:{s:o,s:o},s:o}", "metadata", "labels",
			 pairs(labels), "annotations", pairs(annotations),
			 "status", status);
}

void
kvt_kube_pod_terminating(json_t *pod)
{
	char text[32];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_t *md = json_object_get(pod, "metadata");
	if (md == NULL) {
		md = json_object();
		json_object_set_new(pod, "metadata", md);
	}
	json_object_set_new(md, "deletionTimestamp", json_string(text));
}
