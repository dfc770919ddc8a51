#include "kube_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"

void
kc_start(kcluster *k, int pods, const char *api_token)
{
	memset(k, 0, sizeof(*k));
	char np[16];
	snprintf(np, sizeof(np), "%d", pods);
	const char *sim[] = {"--pods", np, "--dp", "2", NULL};
	clu_sim(&k->c, sim);
	kvt_kube_opts o = {
	    .token = api_token, .state = true, .bookmark_ms = 300};
	kvi_err rv = kvt_kube_start(KVI_KUBEAPI_BIN, &o, 10000, &k->api);
	if (rv != KVI_OK) {
		fail_msg("kvindex-kubeapi did not start: %s", kvi_strerror(rv));
	}
	k->api_started = true;
	assert_int_equal(kvt_tmpdir_make("kvi-kube", &k->dir), KVI_OK);
	k->token_path = kvt_path(k->dir, "token");
	clu_shards(&k->c, 2);
}

void
kc_token_file(kcluster *k, const char *token)
{
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s.tmp", k->token_path);
	FILE *f = fopen(tmp, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", token);
	fclose(f);
	assert_int_equal(rename(tmp, k->token_path), 0);
}

void
kc_coord(kcluster *k, const char *file_token)
{
	kc_coord_at(k, k->api.url, NULL, file_token);
}

void
kc_coord_at(kcluster *k, const char *api, const char *ca_file,
	    const char *file_token)
{
	kc_token_file(k, file_token);
	snprintf(k->api_url, sizeof(k->api_url), "%s", api);
	const char *extra[] = {"--watch-namespace",
			       KC_NS "," KC_NS2,
			       "--watch-label",
			       "app=engine",
			       "--watch-dp-size",
			       "2",
			       "--kube-api",
			       k->api_url,
			       "--kube-token-file",
			       k->token_path,
			       "--watch-not-ready-grace-ms",
			       "2000",
			       ca_file != NULL ? "--kube-ca-file" : NULL,
			       ca_file,
			       NULL};
	clu_coord(&k->c, false, extra);
}

void
kc_cleanup(kcluster *k)
{
	clu_cleanup(&k->c);
	if (k->api_started) {
		int status = -1;
		kvt_kube_stop(&k->api, &status);
	}
	if (k->dir != NULL) {
		kvt_tmpdir_remove(k->dir);
	}
	kvi_free(k->dir);
	kvi_free(k->token_path);
	memset(k, 0, sizeof(*k));
}

void
kc_put_json(kcluster *k, const char *name, json_t *pod)
{
	kvi_err rv = kvt_kube_put_pod(&k->api, KC_NS, name, pod, NULL);
	if (rv != KVI_OK) {
		fail_msg("PUT pod %s: %s", name, kvi_strerror(rv));
	}
}

void
kc_put(kcluster *k, const char *name, const kvt_sim *sim, int p, const char *ip,
       bool ready, int dp_size, const char *app)
{
	int r0 = p * sim->dp;
	char zmq[16], rep[16], rec[16], dp[16];
	snprintf(zmq, sizeof(zmq), "%d", sim->zmq_port[r0]);
	snprintf(rep, sizeof(rep), "%d", sim->replay_port[r0]);
	snprintf(rec, sizeof(rec), "%d", sim->recover_port[r0]);
	snprintf(dp, sizeof(dp), "%d", dp_size);
	const char *labels[] = {"app", app, "kvindex.io/model", "sim-model",
				NULL};
	const char *ann[] = {"kvindex.io/zmq-port",
			     zmq,
			     "kvindex.io/replay-port",
			     rep,
			     "kvindex.io/recover-port",
			     rec,
			     dp_size > 0 ? "kvindex.io/dp-size" : NULL,
			     dp,
			     NULL};
	json_t *pod = kvt_kube_pod(ip, ready, labels, ann);
	kc_put_json(k, name, pod);
	json_decref(pod);
}

void
kc_delete(kcluster *k, const char *name)
{
	kvi_err rv = kvt_kube_delete_pod(&k->api, KC_NS, name);
	if (rv != KVI_OK) {
		fail_msg("DELETE pod %s: %s", name, kvi_strerror(rv));
	}
}

void
kc_expect(char *buf, size_t len, const char *name, int ranks, const char *ip,
	  int port)
{
	for (int r = 0; r < ranks; r++) {
		size_t l = strlen(buf);
		snprintf(buf + l, len - l, "%s%s/%s#%d=tcp://%s:%d",
			 l > 0 ? "," : "", KC_NS, name, r, ip, port + r);
	}
}

static int
kc_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* kc_sorted returns the comma-separated entries of s, sorted. */
static char *
kc_sorted(const char *s)
{
	char *copy = kvi_strdup(s), *save = NULL;
	char *items[512];
	size_t n = 0;
	for (char *t = strtok_r(copy, ",", &save); t != NULL && n < 512;
	     t = strtok_r(NULL, ",", &save)) {
		items[n++] = t;
	}
	qsort(items, n, sizeof(items[0]), kc_cmp);
	size_t len = strlen(s) + 2;
	char *out = kvi_calloc(1, len);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(out);
		snprintf(out + l, len - l, "%s%s", i ? "," : "", items[i]);
	}
	kvi_free(copy);
	return out;
}

char *
kc_workers_sig(kcluster *k)
{
	long st;
	json_t *ws = clu_get(&k->c, "/workers", &st);
	assert_int_equal(st, 200);
	char buf[16384] = "";
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *src =
		    json_string_value(json_object_get(w, "source"));
		const char *name =
		    json_string_value(json_object_get(w, "name"));
		if (src == NULL || strcmp(src, "kubernetes") != 0 ||
		    name == NULL) {
			continue;
		}
		const char *rank;
		json_t *l;
		json_object_foreach(json_object_get(w, "listeners"), rank, l)
		{
			const char *ep =
			    json_string_value(json_object_get(l, "endpoint"));
			const char *s =
			    json_string_value(json_object_get(l, "status"));
			if (s == NULL || strcmp(s, "active") != 0) {
				continue;
			}
			size_t n = strlen(buf);
			snprintf(buf + n, sizeof(buf) - n, "%s%s#%s=%s",
				 n ? "," : "", name, rank, ep ? ep : "-");
		}
	}
	json_decref(ws);
	return kc_sorted(buf);
}

void
kc_wait_workers(kcluster *k, const char *expect, int timeout_ms)
{
	char *want = kc_sorted(expect);
	int64_t deadline = kvt_now_ms() + timeout_ms;
	for (;;) {
		char *got = kc_workers_sig(k);
		if (strcmp(got, want) == 0) {
			kvi_free(got);
			kvi_free(want);
			return;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("/workers:\n  got  %s\n  want %s", got, want);
		}
		kvi_free(got);
		kvt_sleep_ms(100);
	}
}

void
kc_tokens(uint32_t *t, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		t[i] = seed * 100003u + (uint32_t)i * 7u + 1u;
	}
}

void
kc_prefill(const kvt_sim *sim, int p, int r, const uint32_t *t, size_t n)
{
	json_t *toks = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(toks, json_integer(t[i]));
	}
	json_t *b =
	    json_pack("{s:i,s:i,s:o}", "pod", p, "rank", r, "token_ids", toks);
	kvt_http_resp resp;
	kvi_err rv = kvt_sim_call(sim, "POST", "/prefill", b, &resp);
	long st = resp.status;
	kvt_http_resp_fini(&resp);
	json_decref(b);
	if (rv != KVI_OK || st != 200) {
		fail_msg("prefill on pod %d rank %d: %s %ld", p, r,
			 kvi_strerror(rv), st);
	}
}

int
kc_matched(kcluster *k, const uint32_t *t, size_t n, const char *name, int rank)
{
	json_t *toks = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(toks, json_integer(t[i]));
	}
	json_t *b = json_pack("{s:s,s:o}", "model_name", "sim-model",
			      "token_ids", toks);
	char *text = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	long st;
	json_t *ans = clu_post(&k->c, "/query", text, &st);
	free(text);
	int got = 0;
	if (st == 200) {
		char full[300];
		snprintf(full, sizeof(full), "%s/%s", KC_NS, name);
		size_t i;
		json_t *w;
		json_array_foreach(json_object_get(ans, "workers"), i, w)
		{
			const char *pod =
			    json_string_value(json_object_get(w, "pod"));
			json_int_t r =
			    json_integer_value(json_object_get(w, "dp_rank"));
			if (pod != NULL && strcmp(pod, full) == 0 &&
			    r == rank) {
				got = (int)json_integer_value(
				    json_object_get(w, "matched_tokens"));
			}
		}
	} else if (st != 404) {
		fail_msg("/query: HTTP %ld", st);
	}
	json_decref(ans);
	return got;
}

void
kc_wait_matched(kcluster *k, const uint32_t *t, size_t n, const char *name,
		int rank, int want)
{
	int64_t deadline = kvt_now_ms() + KC_WAIT_MS;
	int got;
	while ((got = kc_matched(k, t, n, name, rank)) != want) {
		if (kvt_now_ms() > deadline) {
			fail_msg("%s rank %d matched %d tokens, want %d", name,
				 rank, got, want);
		}
		kvt_sleep_ms(50);
	}
}
