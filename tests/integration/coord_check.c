#include "coord_check.h"

#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"

void
clu_sim(cluster *c, const char *const *extra)
{
	const char *argv[48] = {"--block-size", "16", "--log-level", "debug"};
	int n = 4;
	for (int i = 0; extra != NULL && extra[i] != NULL && n < 46; i++) {
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	kvi_err rv = kvt_sim_start(KVI_SIM_BIN, argv, 10000, &c->sim);
	if (rv != KVI_OK) {
		fail_msg("simulator did not start: %s", kvi_strerror(rv));
	}
	c->sim_started = true;
}

void
clu_shards(cluster *c, int n)
{
	clu_shards_with(c, n, NULL);
}

void
clu_shards_with(cluster *c, int n, const char *const *extra)
{
	assert_true(n <= CLU_MAX_SHARDS);
	for (int i = 0; i < n; i++) {
		shc_start(&c->shards[i], extra);
	}
	c->n_shards = n;
}

static void
clu_launch(cluster *c)
{
	const char *argv[64];
	int n = 0;
	char shards[512] = "", http[64];
	for (int i = 0; i < c->n_shards; i++) {
		size_t used = strlen(shards);
		snprintf(shards + used, sizeof(shards) - used, "%sshard-%d=%s",
			 i ? "," : "", i, c->shards[i].url);
	}
	/* port 0: the coordinator's HTTP port is its own choice at each
	 * start, read back from its log */
	snprintf(http, sizeof(http), "127.0.0.1:0");
	argv[n++] = KVI_COORD_BIN;
	argv[n++] = "--shards";
	argv[n++] = shards;
	argv[n++] = "--http";
	argv[n++] = http;
	argv[n++] = "--data-dir";
	argv[n++] = c->data_dir;
	argv[n++] = "--tick-ms";
	argv[n++] = "100";
	/* a query waits for its shards up to 2 s, not 100 ms: what these
	 * tests check is what the answer says, and a busy machine must not
	 * turn it into a partial one; tests of the deadline give their
	 * own, after this one */
	argv[n++] = "--query-deadline-ms";
	argv[n++] = "2000";
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	if (c->with_file) {
		argv[n++] = "--discovery-file";
		argv[n++] = c->sim.layout_path;
	}
	for (int i = 0; c->coord_extra[i] != NULL && n < 62; i++) {
		argv[n++] = c->coord_extra[i];
	}
	argv[n] = NULL;
	long from = kvt_file_size(c->log_path);
	if (kvt_proc_start(argv, c->log_path, &c->coord) != KVI_OK) {
		fail_msg("cannot start %s", KVI_COORD_BIN);
	}
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	char port[16];
	kvi_err lrv = kvt_log_field(c->log_path, from, "serving", "port", port,
				    sizeof(port), c->coord, CLU_WAIT_MS);
	if (lrv != KVI_OK) {
		fail_msg("kvindex-coordinator did not say where it listens "
			 "(%s); see %s",
			 kvi_strerror(lrv), c->log_path);
	}
	c->port = atoi(port);
	snprintf(c->base, sizeof(c->base), "http://127.0.0.1:%d", c->port);
	while (kvt_now_ms() < deadline) {
		kvt_http_resp r;
		char url[96];
		snprintf(url, sizeof(url), "%s/health", c->base);
		kvi_err rv = kvt_http_get(url, 1000, &r);
		long st = r.status;
		kvt_http_resp_fini(&r);
		if (rv == KVI_OK && st == 200) {
			return;
		}
		if (!kvt_proc_alive(c->coord)) {
			fail_msg("kvindex-coordinator exited; see %s",
				 c->log_path);
		}
		kvt_sleep_ms(50);
	}
	fail_msg("kvindex-coordinator did not answer; see %s", c->log_path);
}

void
clu_coord(cluster *c, bool with_file, const char *const *extra)
{
	assert_int_equal(kvt_tmpdir_make("kvi-coord", &c->dir), KVI_OK);
	c->data_dir = kvt_path(c->dir, "data");
	c->log_path = kvt_path(c->dir, "coord.log");
	c->with_file = with_file;
	int n = 0;
	for (int i = 0; extra != NULL && extra[i] != NULL && n < 31; i++) {
		c->coord_extra[n++] = extra[i];
	}
	c->coord_extra[n] = NULL;
	clu_launch(c);
}

void
clu_coord_restart(cluster *c)
{
	int status = -1;
	assert_int_equal(kvt_proc_stop(c->coord, 10000, &status), KVI_OK);
	if (status != 0) {
		kvt_log_tail("coordinator", c->log_path, 8192);
	}
	assert_int_equal(status, 0);
	kvt_proc_free(c->coord);
	c->coord = NULL;
	clu_launch(c);
}

void
clu_coord_kill9(cluster *c)
{
	kvt_proc_kill(c->coord);
	kvt_proc_free(c->coord);
	c->coord = NULL;
}

void
clu_coord_relaunch(cluster *c)
{
	clu_launch(c);
}

void
clu_cleanup(cluster *c)
{
	if (c->coord != NULL) {
		int status = -1;
		kvt_proc_stop(c->coord, 10000, &status);
		kvt_proc_free(c->coord);
		if (status != 0) {
			fprintf(stderr, "coordinator exit status %d\n", status);
			kvt_log_tail("coordinator", c->log_path, 8192);
		}
	}
	for (int i = 0; i < c->n_shards; i++) {
		shc_cleanup(&c->shards[i]);
	}
	if (c->sim_started) {
		kvt_sim_stop(&c->sim, NULL);
	}
	if (c->dir != NULL && getenv("KVI_TEST_KEEP") == NULL) {
		kvt_tmpdir_remove(c->dir);
	}
	free(c->dir);
	free(c->data_dir);
	free(c->log_path);
	memset(c, 0, sizeof(*c));
}

int
clu_test_setup(void **state)
{
	*state = calloc(1, sizeof(cluster));
	return *state != NULL ? 0 : -1;
}

int
clu_test_teardown(void **state)
{
	clu_cleanup(*state);
	free(*state);
	return 0;
}

void
clu_sigstop(pid_t pid)
{
	assert_int_equal(kill(pid, SIGSTOP), 0);
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	int64_t deadline = kvt_now_ms() + 10000;
	for (;;) {
		DIR *d = opendir(dir);
		assert_non_null(d);
		bool all = true;
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.') {
				continue;
			}
			char path[400], buf[512] = "";
			snprintf(path, sizeof(path), "%s/%s/stat", dir,
				 e->d_name);
			FILE *f = fopen(path, "r");
			if (f != NULL) {
				size_t n = fread(buf, 1, sizeof(buf) - 1, f);
				buf[n] = '\0';
				fclose(f);
			}
			/* "tid (comm) S ...": the state follows the last ')' */
			const char *rp = strrchr(buf, ')');
			all &= rp != NULL && (rp[2] == 'T' || rp[2] == 't');
		}
		closedir(d);
		if (all) {
			return;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(5);
	}
}

/* ---- HTTP ---------------------------------------------------------- */

json_t *
clu_get(cluster *c, const char *path, long *status)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", c->base, path);
	kvt_http_resp r;
	kvi_err rv = kvt_http_get(url, 10000, &r);
	if (rv != KVI_OK) {
		fail_msg("GET %s: %s", path, kvi_strerror(rv));
	}
	*status = r.status;
	json_t *j = json_incref(r.json);
	kvt_http_resp_fini(&r);
	return j;
}

void
clu_post_raw(cluster *c, const char *path, const char *body, kvt_http_resp *out)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", c->base, path);
	kvi_err rv = kvt_http_post(url, body, 10000, out);
	if (rv != KVI_OK) {
		fail_msg("POST %s: %s", path, kvi_strerror(rv));
	}
}

json_t *
clu_post(cluster *c, const char *path, const char *body, long *status)
{
	kvt_http_resp r;
	clu_post_raw(c, path, body, &r);
	*status = r.status;
	json_t *j = json_incref(r.json);
	kvt_http_resp_fini(&r);
	return j;
}

json_t *
clu_listener(cluster *c, const char *pod, int rank, json_t **workers)
{
	long st;
	*workers = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	size_t i;
	json_t *w;
	json_array_foreach(*workers, i, w)
	{
		const char *name =
		    json_string_value(json_object_get(w, "name"));
		if (name != NULL && strcmp(name, pod) == 0) {
			char r[16];
			snprintf(r, sizeof(r), "%d", rank);
			return json_object_get(json_object_get(w, "listeners"),
					       r);
		}
	}
	return NULL;
}

void
clu_wait_active(cluster *c, int n, int timeout_ms)
{
	int64_t deadline = kvt_now_ms() + timeout_ms;
	char *last = NULL;
	for (;;) {
		long st;
		json_t *ws = clu_get(c, "/workers", &st);
		int total = 0, active = 0;
		size_t i;
		json_t *w;
		json_array_foreach(ws, i, w)
		{
			const char *k;
			json_t *l;
			json_object_foreach(json_object_get(w, "listeners"), k,
					    l)
			{
				total++;
				const char *s = json_string_value(
				    json_object_get(l, "status"));
				active += s != NULL && strcmp(s, "active") == 0;
			}
		}
		free(last);
		last = json_dumps(ws, JSON_COMPACT);
		json_decref(ws);
		if (st == 200 && total == n && active == n) {
			free(last);
			return;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("wanted %d active listeners, /workers: %s", n,
				 last);
		}
		kvt_sleep_ms(100);
	}
}

double
clu_metric(cluster *c, const char *sample)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/metrics", c->base);
	return kvt_http_metric(url, sample);
}

json_t *
clu_owner_map(cluster *c)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	json_t *map = json_object();
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *name =
		    json_string_value(json_object_get(w, "name"));
		const char *r;
		json_t *l;
		json_object_foreach(json_object_get(w, "listeners"), r, l)
		{
			char key[300];
			snprintf(key, sizeof(key), "%s#%s", name ? name : "?",
				 r);
			json_object_set(map, key, json_object_get(l, "shard"));
		}
	}
	json_decref(ws);
	return map;
}

json_t *
clu_sim_post(cluster *c, const char *path, const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	assert_non_null(j);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&c->sim, "POST", path, j, &r), KVI_OK);
	if (r.status != 200) {
		fail_msg("simulator POST %s: %ld %s", path, r.status, r.body);
	}
	json_t *out = json_incref(r.json);
	kvt_http_resp_fini(&r);
	json_decref(j);
	return out;
}

static json_t *
clu_tokens_json(const uint32_t *tokens, size_t n)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_integer(tokens[i]));
	}
	return arr;
}

void
clu_prefill(cluster *c, int pod, int rank, const uint32_t *tokens, size_t n)
{
	json_t *b = json_pack("{s:i,s:i,s:o}", "pod", pod, "rank", rank,
			      "token_ids", clu_tokens_json(tokens, n));
	char *text = json_dumps(b, JSON_COMPACT);
	json_decref(clu_sim_post(c, "/prefill", text));
	free(text);
	json_decref(b);
}

uint64_t
clu_instance_id(int pod)
{
	char name[64];
	snprintf(name, sizeof(name), "sim/pod-%d", pod);
	return XXH3_64bits(name, strlen(name)) >> 11;
}

void
clu_tokens_seeded(uint32_t *t, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		t[i] = (seed * 2654435761u + (uint32_t)i * 40503u) % 150000u;
	}
}

char *
clu_tokens_text(const uint32_t *tokens, size_t n)
{
	json_t *arr = clu_tokens_json(tokens, n);
	char *text = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	return text;
}

json_t *
clu_query(cluster *c, const uint32_t *tokens, size_t n, const char *extra)
{
	json_t *arr = clu_tokens_json(tokens, n);
	char *toks = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	size_t len = strlen(toks) + (extra ? strlen(extra) : 0) + 64;
	char *body = kvi_malloc(len);
	snprintf(body, len,
		 "{\"model_name\":\"sim-model\",\"token_ids\":%s%s%s}", toks,
		 extra ? "," : "", extra ? extra : "");
	free(toks);
	long st;
	json_t *ans = clu_post(c, "/query", body, &st);
	if (st != 200) {
		char *dump = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
		fail_msg("/query: %ld %s", st, dump ? dump : "(not JSON)");
	}
	kvi_free(body);
	return ans;
}

char *
clu_query_packed(cluster *c, const uint32_t *tokens, size_t n,
		 const char *params)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/query?model_name=sim-model%s%s", c->base,
		 params ? "&" : "", params ? params : "");
	uint8_t *body = kvi_malloc(4 * n + 1);
	for (size_t i = 0; i < n; i++) {
		for (int b = 0; b < 4; b++) {
			body[4 * i + (size_t)b] = (uint8_t)(tokens[i] >> 8 * b);
		}
	}
	kvt_http_resp r;
	kvi_err rv = kvt_http_post_bytes(url, body, 4 * n,
					 "application/octet-stream", 10000, &r);
	kvi_free(body);
	if (rv != KVI_OK || r.status != 200) {
		fail_msg("packed /query: %s %ld %s", kvi_strerror(rv), r.status,
			 r.body ? r.body : "");
	}
	char *text = kvi_strdup(r.body);
	kvt_http_resp_fini(&r);
	return text;
}

shardproc *
clu_shard_of(cluster *c, int pod, int rank)
{
	char name[32];
	snprintf(name, sizeof(name), "sim/pod-%d", pod);
	json_t *ws;
	json_t *l = clu_listener(c, name, rank, &ws);
	assert_non_null(l);
	const char *sh = json_string_value(json_object_get(l, "shard"));
	assert_non_null(sh);
	int k = -1;
	assert_int_equal(sscanf(sh, "shard-%d", &k), 1);
	assert_true(k >= 0 && k < c->n_shards);
	json_decref(ws);
	return &c->shards[k];
}

long
clu_admin(cluster *c, const char *method, const char *path, const char *body,
	  json_t **out)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", c->base, path);
	kvt_http_resp r;
	assert_int_equal(kvt_http_request(method, url, body, NULL, 10000, &r),
			 KVI_OK);
	long st = r.status;
	if (st >= 400) {
		/* every refusal says why */
		assert_non_null(
		    json_string_value(json_object_get(r.json, "error")));
	}
	if (out != NULL) {
		*out = json_incref(r.json);
	}
	kvt_http_resp_fini(&r);
	return st;
}

/* clu_shard_status_is says whether /admin/shards gives shard id status
 * (NULL: lists it at all). */
bool
clu_shard_status_is(cluster *c, const char *id, const char *status)
{
	long st;
	json_t *arr = clu_get(c, "/admin/shards", &st);
	assert_int_equal(st, 200);
	bool is = false;
	size_t i;
	json_t *s;
	json_array_foreach(arr, i, s)
	{
		const char *sid = json_string_value(json_object_get(s, "id"));
		const char *ss =
		    json_string_value(json_object_get(s, "status"));
		is |=
		    sid != NULL && strcmp(sid, id) == 0 &&
		    (status == NULL || (ss != NULL && strcmp(ss, status) == 0));
	}
	json_decref(arr);
	return is;
}

size_t
clu_moves_busy(cluster *c, char **dump)
{
	json_t *moves = NULL;
	assert_int_equal(clu_admin(c, "GET", "/admin/moves", NULL, &moves),
			 200);
	size_t busy = 0, i;
	json_t *m;
	json_array_foreach(moves, i, m)
	{
		const char *ph = json_string_value(json_object_get(m, "phase"));
		busy += ph != NULL && strcmp(ph, "done") != 0;
	}
	if (dump != NULL) {
		*dump = json_dumps(moves, JSON_COMPACT);
	}
	json_decref(moves);
	return busy;
}

void
clu_wait_converged(cluster *c, int n)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *r = NULL;
		long st = clu_admin(c, "POST", "/admin/rebalance",
				    "{\"dry_run\": true}", &r);
		assert_int_equal(st, 200);
		size_t moves = json_array_size(json_object_get(r, "moves"));
		json_decref(r);
		if (moves == 0 && clu_moves_busy(c, NULL) == 0) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	clu_wait_active(c, n, CLU_WAIT_MS);
}

bool
clu_sim_load_done(void *arg)
{
	cluster *c = arg;
	kvt_http_resp r;
	if (kvt_sim_call(&c->sim, "GET", "/status", NULL, &r) != KVI_OK) {
		return false;
	}
	bool done = json_is_true(json_object_get(r.json, "load_done"));
	kvt_http_resp_fini(&r);
	return done;
}

int
clu_rank_on(cluster *c, int k, int ranks, int dp)
{
	for (int i = 0; i < ranks; i++) {
		if (clu_shard_of(c, i / dp, i % dp) == &c->shards[k]) {
			return i;
		}
	}
	return -1;
}

long
clu_score(const json_t *ans, int idx, int dp)
{
	char id[24], r[16];
	snprintf(id, sizeof(id), "%" PRIu64, clu_instance_id(idx / dp));
	snprintf(r, sizeof(r), "%d", idx % dp);
	return (long)json_integer_value(json_object_get(
	    json_object_get(json_object_get(ans, "scores"), id), r));
}
