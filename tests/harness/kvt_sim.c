#include "kvt_sim.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "kvt_env.h"

#define MAX_ARGS     128
#define STOP_TIMEOUT 10000
#define HTTP_TIMEOUT 10000

static int
port_of(const json_t *pod, const char *key)
{
	json_t *v = json_object_get(pod, key);
	return json_is_integer(v) ? (int)json_integer_value(v) : 0;
}

/* read_layout fills the ports from s->layout. */
static kvi_err
read_layout(kvt_sim *s)
{
	const char *control =
	    json_string_value(json_object_get(s->layout, "control"));
	json_t *pods = json_object_get(s->layout, "pods");
	if (control == NULL || !json_is_array(pods) ||
	    json_array_size(pods) == 0) {
		return KVI_EPROTO;
	}
	snprintf(s->control, sizeof(s->control), "%s", control);
	s->pods = (int)json_array_size(pods);
	s->dp = port_of(json_array_get(pods, 0), "dp_size");
	const char *ip =
	    json_string_value(json_object_get(json_array_get(pods, 0), "ip"));
	snprintf(s->ip, sizeof(s->ip), "%s", ip != NULL ? ip : "127.0.0.1");
	if (s->dp <= 0) {
		return KVI_EPROTO;
	}
	if ((size_t)s->pods * (size_t)s->dp > KVT_SIM_MAX_RANKS) {
		return KVI_ERANGE;
	}
	s->n = s->pods * s->dp;
	for (int p = 0; p < s->pods; p++) {
		json_t *pod = json_array_get(pods, (size_t)p);
		int zmq = port_of(pod, "zmq_port");
		int replay = port_of(pod, "replay_port");
		int recover = port_of(pod, "recover_port");
		/* a pod of a group over several pods: its ports are offset
		 * by its global ranks, from dp_start_rank */
		int start = port_of(pod, "dp_start_rank");
		for (int r = 0; r < s->dp; r++) {
			int i = p * s->dp + r, g = start + r;
			s->zmq_port[i] = zmq + g;
			s->replay_port[i] = replay ? replay + g : 0;
			s->recover_port[i] = recover ? recover + g : 0;
		}
	}
	return KVI_OK;
}

kvi_err
kvt_sim_start(const char *bin, const char *const *extra, int timeout_ms,
	      kvt_sim *s)
{
	memset(s, 0, sizeof(*s));
	kvi_err rv = kvt_tmpdir_make("kvi-sim", &s->dir);
	if (rv != KVI_OK) {
		return rv;
	}
	s->layout_path = kvt_path(s->dir, "layout.json");
	s->log_path = kvt_path(s->dir, "sim.log");
	const char *argv[MAX_ARGS] = {bin,
				      "--control",
				      "127.0.0.1:0",
				      "--layout-file",
				      s->layout_path,
				      "--log-file",
				      s->log_path};
	size_t n = 0;
	while (argv[n] != NULL) {
		n++;
	}
	for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
		if (n + 1 >= MAX_ARGS) {
			return KVI_EINVAL;
		}
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	rv = kvt_proc_start(argv, s->log_path, &s->proc);
	if (rv != KVI_OK) {
		return rv;
	}
	if (!kvt_wait_file(s->layout_path, timeout_ms)) {
		kvt_proc_stop(s->proc, STOP_TIMEOUT, NULL);
		return KVI_ETIMEDOUT;
	}
	s->layout = json_load_file(s->layout_path, 0, NULL);
	rv = s->layout != NULL ? read_layout(s) : KVI_EPROTO;
	if (rv != KVI_OK) {
		kvt_proc_stop(s->proc, STOP_TIMEOUT, NULL);
	}
	return rv;
}

void
kvt_sim_stop(kvt_sim *s, int *status)
{
	int st = -1;
	if (s->proc != NULL) {
		kvt_proc_stop(s->proc, STOP_TIMEOUT, &st);
		kvt_proc_free(s->proc);
		s->proc = NULL;
	}
	if (s->dir != NULL) {
		kvt_tmpdir_remove(s->dir);
	}
	kvi_free(s->dir);
	kvi_free(s->layout_path);
	kvi_free(s->log_path);
	json_decref(s->layout);
	s->dir = s->layout_path = s->log_path = NULL;
	s->layout = NULL;
	if (status != NULL) {
		*status = st;
	}
}

kvi_err
kvt_sim_call(const kvt_sim *s, const char *method, const char *path,
	     const json_t *body, kvt_http_resp *out)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", s->control, path);
	if (strcmp(method, "GET") == 0) {
		return kvt_http_get(url, HTTP_TIMEOUT, out);
	}
	if (body == NULL) {
		return kvt_http_post(url, "{}", HTTP_TIMEOUT, out);
	}
	return kvt_http_post_json(url, body, HTTP_TIMEOUT, out);
}

long
kvt_sim_post(const kvt_sim *s, const char *path)
{
	kvt_http_resp r;
	long status = 0;
	if (kvt_sim_call(s, "POST", path, NULL, &r) == KVI_OK) {
		status = r.status;
	}
	kvt_http_resp_fini(&r);
	return status;
}

int
kvt_sim_metrics_port(const kvt_sim *s, int pod)
{
	json_t *pods = json_object_get(s->layout, "pods");
	return port_of(json_array_get(pods, (size_t)pod), "metrics_port");
}
