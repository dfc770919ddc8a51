/*
 * test_coord_badinput.c - bad input at the coordinator's HTTP API (issue
 * scenario 4), against a real cluster: the simulator's DP=2 pods from the
 * discovery file, two shards, and a coordinator with small limits
 * (--max-body-bytes 4096, --max-tokens 1000).
 *
 * Every bad request gets its status code and an {"error": "..."} body
 * that names the offending field and value: invalid JSON, wrong types,
 * token ids that are not u32s, a dp_rank that is not a u16 or that the
 * instance does not have (with "connected_ranks"), dp_size 0 and 65537,
 * an unknown model (404), a body or a token list over the limit (413), a
 * wrong method (405) and an unknown path (404). Afterwards the
 * coordinator is healthy and has lost nothing: the pods, their listeners
 * and what was indexed before are all still there.
 *
 * test_admin_token: the admin token file as people write it (a trailing
 * space and newline, 600 bytes) is read exactly, and one that is not a
 * token stops the coordinator at start with the reason.
 *
 * test_register_token: with an admin and a registration token, /register
 * and /unregister take either and nothing without (401) or with another
 * (403), and the registration token does not open /admin; with a
 * registration token alone, /admin is open and the log warns of it.
 *
 * test_two_authorizations: a request with two Authorization headers, the
 * right token in either, is 400 at the coordinator and at a shard's
 * metrics server (the first header used to win).
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"

#define NTOK     64 /* four blocks */
#define MAX_BODY 4096
#define MAX_TOK  1000

static void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

static char *
dump(const json_t *j)
{
	static char buf[4096];
	char *s =
	    j != NULL ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	snprintf(buf, sizeof(buf), "%s", s != NULL ? s : "(not JSON)");
	free(s);
	return buf;
}

/* log_has says whether the coordinator's log has the text. */
static bool
log_has(cluster *c, const char *text)
{
	char *log = kvt_file_read(c->log_path, NULL);
	assert_non_null(log);
	bool has = strstr(log, text) != NULL;
	kvi_free(log);
	return has;
}

/* check_error checks an answer: status want and {"error": "..."} whose
 * message holds every word of the NULL-terminated list. */
static void
check_error(const char *what, long st, const json_t *j, long want,
	    const char *const *words)
{
	if (st != want) {
		fail_msg("%s: %ld %s, expected %ld", what, st, dump(j), want);
	}
	const char *e = json_string_value(json_object_get(j, "error"));
	if (e == NULL) {
		fail_msg("%s: no error message: %s", what, dump(j));
	}
	for (int i = 0; words != NULL && words[i] != NULL; i++) {
		if (strstr(e, words[i]) == NULL) {
			fail_msg("%s: the error does not name \"%s\": %s", what,
				 words[i], e);
		}
	}
}

/* post_err posts body to path and checks the error answer; returns it
 * (the caller frees it). */
static json_t *
post_err(cluster *c, const char *path, const char *body, long want,
	 const char *const *words)
{
	long st;
	json_t *j = clu_post(c, path, body, &st);
	char what[160];
	snprintf(what, sizeof(what), "POST %s %.100s", path, body);
	check_error(what, st, j, want, words);
	return j;
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

static void
expect(cluster *c, const char *path, const char *body, long want,
       const char *const *words)
{
	json_decref(post_err(c, path, body, want, words));
}

/* wait_match waits until /query for tokens matches all of them on (pod
 * p, rank) and nothing else. */
static void
wait_match(cluster *c, const uint32_t *tokens, int p, int rank)
{
	char id[24];
	snprintf(id, sizeof(id), "%" PRIu64, clu_instance_id(p));
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans = clu_query(c, tokens, NTOK, NULL);
		const json_t *ws = json_object_get(ans, "workers");
		const json_t *w = json_array_get(ws, 0);
		if (json_array_size(ws) == 1 &&
		    strcmp(json_string_value(json_object_get(w, "instance_id")),
			   id) == 0 &&
		    json_integer_value(json_object_get(w, "dp_rank")) == rank &&
		    json_integer_value(json_object_get(w, "matched_tokens")) ==
			NTOK) {
			json_decref(ans);
			return;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("wanted pod %d rank %d: %s", p, rank,
				 dump(ans));
		}
		json_decref(ans);
		kvt_sleep_ms(50);
	}
}

/* tokens_body writes a /query body of n token ids, each "1"; returns it
 * (kvi_free). */
static char *
tokens_body(size_t n)
{
	size_t len = 2 * n + 64;
	char *b = kvi_malloc(len);
	size_t k = (size_t)snprintf(b, len,
				    "{\"model_name\":\"sim-model\","
				    "\"token_ids\":[");
	for (size_t i = 0; i < n; i++) {
		b[k++] = '1';
		b[k++] = i + 1 < n ? ',' : ']';
	}
	b[k++] = '}';
	b[k] = '\0';
	return b;
}

static int
n_listeners(cluster *c, int *active)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	int n = 0;
	*active = 0;
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *k;
		json_t *l;
		json_object_foreach(json_object_get(w, "listeners"), k, l)
		{
			n++;
			*active += strcmp(json_string_value(
					      json_object_get(l, "status")),
					  "active") == 0;
		}
	}
	json_decref(ws);
	return n;
}

static void
test_bad_input(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "2", "--dp", "2", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	const char *extra[] = {"--max-body-bytes", "4096", "--max-tokens",
			       "1000", NULL};
	clu_coord(c, true, extra);
	clu_wait_active(c, 4, CLU_WAIT_MS);

	/* something indexed before the bad input, to find afterwards */
	uint32_t before[NTOK];
	make_tokens(before, 7);
	clu_prefill(c, 0, 1, before, NTOK);
	wait_match(c, before, 0, 1);

	char id0[24], body[1024];
	snprintf(id0, sizeof(id0), "%" PRIu64, clu_instance_id(0));

	/* invalid JSON, everywhere */
	const char *paths[] = {"/query", "/query_by_hash", "/register",
			       "/unregister"};
	for (size_t i = 0; i < 4; i++) {
		expect(c, paths[i], "{\"model_name\":\"sim-model\",\"tok", 400,
		       W("invalid JSON"));
		expect(c, paths[i], "", 400, W("invalid JSON"));
		expect(c, paths[i], "[1,2,3]", 400, W("object", "array"));
	}
	expect(c, "/query",
	       "{\"model_name\":\"a\",\"model_name\":\"b\",\"token_ids\":[]}",
	       400, W("model_name"));

	/* wrong types */
	expect(c, "/query", "{\"model_name\":7,\"token_ids\":[1]}", 400,
	       W("model_name", "got 7"));
	expect(c, "/query", "{\"token_ids\":[1]}", 400,
	       W("model_name", "missing"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":\"abc\"}", 400,
	       W("token_ids", "abc"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"instances\":5}",
	       400, W("instances", "got 5"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"instances\":[\"abc\"]}",
	       400, W("instances[0]", "abc"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"dp_rank\":\"1\"}",
	       400, W("dp_rank"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"lora_name\":[]}",
	       400, W("lora_name"));
	expect(c, "/query_by_hash",
	       "{\"model_name\":\"sim-model\",\"block_hashes\":{}}", 400,
	       W("block_hashes"));

	/* token ids that are not u32s */
	expect(
	    c, "/query",
	    "{\"model_name\":\"sim-model\",\"token_ids\":[1,2,3,4294967296]}",
	    400, W("token_ids[3]", "4294967296"));
	expect(c, "/query", "{\"model_name\":\"sim-model\",\"token_ids\":[-1]}",
	       400, W("token_ids[0]", "-1"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[5,1.5]}", 400,
	       W("token_ids[1]", "1.5"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":"
	       "[18446744073709551616]}",
	       400, W("token_ids[0]", "18446744073709551616"));
	expect(c, "/query_by_hash",
	       "{\"model_name\":\"sim-model\",\"block_hashes\":[1,-1]}", 400,
	       W("block_hashes[1]", "-1"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"instances\":[18446744073709551616]}",
	       400, W("instances[0]", "18446744073709551616"));
	/* the largest u32 is a token id */
	long st;
	json_t *j = clu_post(c, "/query",
			     "{\"model_name\":\"sim-model\",\"token_ids\":"
			     "[4294967295]}",
			     &st);
	assert_int_equal(st, 200);
	json_decref(j);

	/* dp_rank: not a u16, or not a rank of the instance */
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"dp_rank\":65536}",
	       400, W("dp_rank 65536"));
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"dp_rank\":-1}",
	       400, W("dp_rank -1"));
	snprintf(body, sizeof(body),
		 "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
		 "\"instances\":[%s],\"dp_rank\":5}",
		 id0);
	j = post_err(c, "/query", body, 400, W("dp_rank 5 ", id0));
	json_t *conn = json_object_get(j, "connected_ranks");
	if (!json_is_array(conn) || json_array_size(conn) != 2 ||
	    json_integer_value(json_array_get(conn, 0)) != 0 ||
	    json_integer_value(json_array_get(conn, 1)) != 1) {
		fail_msg("connected_ranks should be [0,1]: %s", dump(j));
	}
	json_decref(j);
	expect(c, "/query",
	       "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
	       "\"instances\":[12345]}",
	       400, W("12345"));
	/* a rank it has is fine */
	snprintf(body, sizeof(body),
		 "{\"model_name\":\"sim-model\",\"token_ids\":[1],"
		 "\"instances\":[%s],\"dp_rank\":1}",
		 id0);
	json_decref(clu_post(c, "/query", body, &st));
	assert_int_equal(st, 200);

	/* registration */
	const char *pod = "\"name\":\"bad/pod\",\"ip\":\"127.0.0.1\","
			  "\"zmq_port\":5557,\"model_name\":\"sim-model\","
			  "\"block_size\":16";
	snprintf(body, sizeof(body), "{%s,\"dp_size\":0}", pod);
	expect(c, "/register", body, 400, W("dp_size 0 "));
	snprintf(body, sizeof(body), "{%s,\"dp_size\":65537}", pod);
	expect(c, "/register", body, 400, W("dp_size 65537"));
	snprintf(body, sizeof(body), "{%s,\"dp_size\":\"2\"}", pod);
	expect(c, "/register", body, 400, W("dp_size"));
	expect(c, "/register",
	       "{\"name\":\"bad/pod\",\"ip\":\"127.0.0.1\",\"zmq_port\":70000,"
	       "\"dp_size\":1,\"model_name\":\"sim-model\",\"block_size\":16}",
	       400, W("zmq_port 70000"));
	expect(c, "/register",
	       "{\"name\":\"bad/pod\",\"ip\":\"127.0.0.1\",\"zmq_port\":5557,"
	       "\"dp_size\":1,\"model_name\":7,\"block_size\":16}",
	       400, W("model_name", "got 7"));
	const char *rank = "\"instance_id\":77,\"endpoint\":"
			   "\"tcp://127.0.0.1:5557\",\"model_name\":"
			   "\"sim-model\",\"block_size\":16";
	snprintf(body, sizeof(body), "{%s,\"dp_rank\":65536}", rank);
	expect(c, "/register", body, 400, W("dp_rank 65536"));
	snprintf(body, sizeof(body), "{%s,\"dp_rank\":-1}", rank);
	expect(c, "/register", body, 400, W("dp_rank -1"));
	snprintf(body, sizeof(body), "{%s,\"name\":\"bad/pod\"}", rank);
	expect(c, "/register", body, 400, W("instance_id"));
	expect(c, "/register", "{\"model_name\":\"sim-model\"}", 400,
	       W("instance_id"));
	/* /unregister */
	expect(c, "/unregister",
	       "{\"instance_id\":77,\"model_name\":\"sim-model\","
	       "\"dp_rank\":65536}",
	       400, W("dp_rank 65536"));
	expect(c, "/unregister", "{\"instance_id\":\"x\"}", 400,
	       W("instance_id"));
	/* a pod of the discovery file is not HTTP's to remove */
	expect(c, "/unregister", "{\"name\":\"sim/pod-0\"}", 409, W("file"));
	expect(c, "/unregister", "{\"name\":\"no/such-pod\"}", 404,
	       W("no/such-pod"));

	/* unknown model */
	expect(c, "/query", "{\"model_name\":\"nope-model\",\"token_ids\":[1]}",
	       404, W("model", "nope-model"));
	expect(c, "/query_by_hash",
	       "{\"model_name\":\"nope-model\",\"block_hashes\":[1]}", 404,
	       W("model", "nope-model"));

	/* too large: the body (maybe refused by the HTTP layer before any
	 * handler: then the status alone), or the token count */
	char *big = tokens_body(4200); /* over 8 KiB */
	assert_true(strlen(big) > 2 * MAX_BODY);
	const char *big_paths[] = {"/query", "/register"};
	for (size_t i = 0; i < 2; i++) {
		kvt_http_resp r;
		clu_post_raw(c, big_paths[i], big, &r);
		if (r.status != 413) {
			fail_msg("POST %s with %zu bytes: %ld %s", big_paths[i],
				 strlen(big), r.status, r.body);
		}
		if (r.json != NULL) {
			check_error("oversized body", r.status, r.json, 413,
				    NULL);
		}
		kvt_http_resp_fini(&r);
	}
	kvi_free(big);
	big = tokens_body(MAX_TOK + 500);
	assert_true(strlen(big) < MAX_BODY);
	expect(c, "/query", big, 413, W("token_ids", "1500", "1000"));
	kvi_free(big);
	/* exactly the maximum is fine */
	big = tokens_body(MAX_TOK);
	json_decref(clu_post(c, "/query", big, &st));
	assert_int_equal(st, 200);
	kvi_free(big);

	/* wrong method, unknown path */
	j = clu_get(c, "/query", &st);
	check_error("GET /query", st, j, 405, NULL);
	json_decref(j);
	j = clu_get(c, "/register", &st);
	check_error("GET /register", st, j, 405, NULL);
	json_decref(j);
	j = clu_get(c, "/no/such/path", &st);
	check_error("GET /no/such/path", st, j, 404, NULL);
	json_decref(j);
	expect(c, "/querry", "{}", 404, NULL);

	/* no token: the start warned that /admin and /register are open */
	assert_true(log_has(c, "admin_open"));
	assert_true(log_has(c, "register_open"));

	/* healthy, and nothing lost */
	assert_true(kvt_proc_alive(c->coord));
	j = clu_get(c, "/health", &st);
	assert_int_equal(st, 200);
	json_decref(j);
	j = clu_get(c, "/ready", &st);
	if (st != 200) {
		fail_msg("/ready: %ld %s", st, dump(j));
	}
	json_decref(j);
	int active;
	assert_int_equal(n_listeners(c, &active), 4);
	assert_int_equal(active, 4);
	j = clu_get(c, "/workers", &st);
	assert_int_equal(json_array_size(j), 2);
	json_decref(j);
	wait_match(c, before, 0, 1);
	uint32_t after[NTOK];
	make_tokens(after, 8);
	clu_prefill(c, 1, 1, after, NTOK);
	wait_match(c, after, 1, 1);
}

/* admin_status sends GET /admin/shards with the bearer token (NULL:
 * none) and returns the status. */
static long
admin_status(cluster *c, const char *token)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/admin/shards", c->base);
	size_t len = (token ? strlen(token) : 0) + 32;
	char *h = kvi_malloc(len);
	snprintf(h, len, "Authorization: Bearer %s", token ? token : "");
	kvt_http_resp r;
	assert_int_equal(
	    kvt_http_request("GET", url, NULL, token ? h : NULL, 10000, &r),
	    KVI_OK);
	long st = r.status;
	if (st != 200) {
		assert_non_null(
		    json_string_value(json_object_get(r.json, "error")));
	}
	kvt_http_resp_fini(&r);
	kvi_free(h);
	return st;
}

/* test_admin_token: a token file's newline and trailing space are not
 * part of the token, and a long token is compared whole (it was cut at
 * 511 bytes, so that its first 511 were enough). A token file with two
 * words is refused at start, saying so. */
static void
test_admin_token(void **state)
{
	cluster *c = *state;
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-token", &dir), KVI_OK);
	char *path = kvt_path(dir, "token");
	char token[601];
	for (int i = 0; i < 600; i++) {
		token[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[i % 36];
	}
	token[600] = '\0';
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s \n", token);
	fclose(f);

	const char *sim[] = {"--pods", "1", "--dp", "2", NULL};
	clu_sim(c, sim);
	clu_shards(c, 1);
	const char *extra[] = {"--admin-token-file", path, NULL};
	clu_coord(c, true, extra);
	assert_int_equal(admin_status(c, NULL), 401);
	assert_int_equal(admin_status(c, token), 200);
	char cut[512];
	snprintf(cut, sizeof(cut), "%.511s", token);
	assert_int_equal(admin_status(c, cut), 403);
	char more[700];
	snprintf(more, sizeof(more), "%sx", token);
	assert_int_equal(admin_status(c, more), 403);

	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "two words\n");
	fclose(f);
	char *log = kvt_path(dir, "coord.log");
	const char *argv[] = {
	    KVI_COORD_BIN, "--shards",    "s=tcp://127.0.0.1:1",
	    "--http",      "127.0.0.1:0", "--admin-token-file",
	    path,          NULL};
	kvt_proc *p;
	assert_int_equal(kvt_proc_start(argv, log, &p), KVI_OK);
	int status;
	assert_int_equal(kvt_proc_wait(p, 10000, &status), KVI_OK);
	assert_true(status > 0 && status < 128); /* an exit, not a crash */
	kvt_proc_free(p);
	char *text = kvt_file_read(log, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "white space"));
	kvi_free(text);
	kvi_free(log);
	kvi_free(path);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

/* connect_to opens a TCP connection to the coordinator's port. */
static int
connect_to(cluster *c)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)c->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* test_max_connections: with --max-connections 4, a fifth connection gets
 * a 503 at once (and the counter says so); once the four close, the
 * coordinator serves again. */
static void
test_max_connections(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "1", "--dp", "1", NULL};
	clu_sim(c, sim);
	clu_shards(c, 1);
	const char *extra[] = {"--max-connections", "4", "--http-threads", "1",
			       NULL};
	clu_coord(c, true, extra);
	kvt_sleep_ms(300); /* the start-up probe's connection is gone */
	int idle[4];
	for (int i = 0; i < 4; i++) {
		idle[i] = connect_to(c);
	}
	kvt_sleep_ms(200);
	int fd = connect_to(c);
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	const char *req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	char out[1024] = "";
	ssize_t n = read(fd, out, sizeof(out) - 1);
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "HTTP/1.1 503 "));
	close(fd);
	for (int i = 0; i < 4; i++) {
		close(idle[i]);
	}
	kvt_sleep_ms(700);
	long st;
	json_decref(clu_get(c, "/health", &st));
	assert_int_equal(st, 200);
	assert_true(clu_metric(c, "kvindex_http_connections_refused_total") >=
		    1);
}

/* token_file writes token into a file named name in dir, and returns
 * its path (kvi_free). */
static char *
token_file(const char *dir, const char *name, const char *token)
{
	char *path = kvt_path(dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", token);
	fclose(f);
	return path;
}

/* write_status sends a write (POST path with body) with the bearer token
 * (NULL: no Authorization) and returns the status; a refusal must say
 * why. */
static long
write_status(cluster *c, const char *path, const char *body, const char *token)
{
	char url[128], h[128];
	snprintf(url, sizeof(url), "%s%s", c->base, path);
	snprintf(h, sizeof(h), "Authorization: Bearer %s", token ? token : "");
	kvt_http_resp r;
	assert_int_equal(
	    kvt_http_request("POST", url, body, token ? h : NULL, 10000, &r),
	    KVI_OK);
	long st = r.status;
	if (st >= 400) {
		assert_non_null(
		    json_string_value(json_object_get(r.json, "error")));
	}
	kvt_http_resp_fini(&r);
	return st;
}

static void
test_register_token(void **state)
{
	cluster *c = *state;
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-token", &dir), KVI_OK);
	char *admin = token_file(dir, "admin", "adm-secret");
	char *reg = token_file(dir, "register", "reg-secret");
	const char *sim[] = {"--pods", "1", "--dp", "2", NULL};
	clu_sim(c, sim);
	clu_shards(c, 1);
	const char *extra[] = {"--admin-token-file", admin,
			       "--register-token-file", reg, NULL};
	clu_coord(c, false, extra);
	char body[512];
	snprintf(body, sizeof(body),
		 "{\"name\":\"sim/pod-0\",\"ip\":\"127.0.0.1\","
		 "\"zmq_port\":%d,\"dp_size\":2,\"model_name\":\"sim-model\","
		 "\"block_size\":16}",
		 c->sim.zmq_port[0]);
	const char *unreg = "{\"name\":\"sim/pod-0\"}";

	assert_int_equal(write_status(c, "/register", body, NULL), 401);
	assert_int_equal(write_status(c, "/register", body, "wrong"), 403);
	assert_int_equal(write_status(c, "/register", body, "reg-secretx"),
			 403);
	int active;
	assert_int_equal(n_listeners(c, &active), 0);
	assert_int_equal(write_status(c, "/register", body, "reg-secret"), 201);
	assert_int_equal(write_status(c, "/register", body, "adm-secret"), 200);
	assert_int_equal(n_listeners(c, &active), 2);
	assert_int_equal(write_status(c, "/unregister", unreg, NULL), 401);
	assert_int_equal(write_status(c, "/unregister", unreg, "wrong"), 403);
	assert_int_equal(n_listeners(c, &active), 2);
	/* the registration token is not the admin token */
	assert_int_equal(admin_status(c, "reg-secret"), 403);
	assert_int_equal(admin_status(c, "adm-secret"), 200);
	assert_int_equal(write_status(c, "/unregister", unreg, "reg-secret"),
			 200);
	assert_int_equal(n_listeners(c, &active), 0);
	assert_int_equal(write_status(c, "/register", body, "adm-secret"), 201);
	assert_int_equal(write_status(c, "/unregister", unreg, "adm-secret"),
			 200);
	assert_false(log_has(c, "admin_open"));
	assert_false(log_has(c, "register_open"));
	kvi_free(admin);
	kvi_free(reg);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

/* test_register_token_alone: a registration token and no admin token:
 * /admin is open, and the log says so at start; /register is not. */
static void
test_register_token_alone(void **state)
{
	cluster *c = *state;
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-token", &dir), KVI_OK);
	char *reg = token_file(dir, "register", "reg-secret");
	const char *sim[] = {"--pods", "1", "--dp", "1", NULL};
	clu_sim(c, sim);
	clu_shards(c, 1);
	const char *extra[] = {"--register-token-file", reg, NULL};
	clu_coord(c, false, extra);
	assert_int_equal(admin_status(c, NULL), 200);
	assert_int_equal(
	    write_status(c, "/unregister", "{\"name\":\"a/b\"}", NULL), 401);
	assert_int_equal(
	    write_status(c, "/unregister", "{\"name\":\"a/b\"}", "reg-secret"),
	    404);
	assert_true(log_has(c, "admin_open"));
	assert_false(log_has(c, "register_open"));
	kvi_free(reg);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

/* raw_status sends req as it is to 127.0.0.1:port, on a connection of
 * its own, and returns the status of the answer. */
static int
raw_status(int port, const char *req)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	char out[256] = "";
	ssize_t n = read(fd, out, sizeof(out) - 1);
	close(fd);
	assert_true(n > 12);
	out[n] = '\0';
	assert_int_equal(strncmp(out, "HTTP/1.1 ", 9), 0);
	return atoi(out + 9);
}

/* auth_request writes a GET of path with an Authorization header for
 * each of the tokens first and second (NULL: none). */
static void
auth_request(char *buf, size_t len, const char *path, const char *first,
	     const char *second)
{
	int n = snprintf(buf, len, "GET %s HTTP/1.1\r\nHost: x\r\n", path);
	const char *tokens[] = {first, second};
	for (int i = 0; i < 2; i++) {
		if (tokens[i] != NULL) {
			n +=
			    snprintf(buf + n, len - (size_t)n,
				     "Authorization: Bearer %s\r\n", tokens[i]);
		}
	}
	snprintf(buf + n, len - (size_t)n, "Connection: close\r\n\r\n");
}

static void
test_two_authorizations(void **state)
{
	cluster *c = *state;
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-token", &dir), KVI_OK);
	char *path = kvt_path(dir, "token");
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "right-token\n");
	fclose(f);
	const char *sim[] = {"--pods", "1", "--dp", "1", NULL};
	clu_sim(c, sim);
	clu_shards(c, 1);
	const char *extra[] = {"--admin-token-file", path, NULL};
	clu_coord(c, true, extra);

	char req[512];
	auth_request(req, sizeof(req), "/admin/shards", "right-token", NULL);
	assert_int_equal(raw_status(c->port, req), 200);
	auth_request(req, sizeof(req), "/admin/shards", "right-token",
		     "wrong-token");
	assert_int_equal(raw_status(c->port, req), 400);
	auth_request(req, sizeof(req), "/admin/shards", "wrong-token",
		     "right-token");
	assert_int_equal(raw_status(c->port, req), 400);
	auth_request(req, sizeof(req), "/admin/shards", "right-token",
		     "right-token");
	assert_int_equal(raw_status(c->port, req), 400);
	/* the admin token protects /register too: nothing is open */
	assert_false(log_has(c, "admin_open"));
	assert_false(log_has(c, "register_open"));

	/* the shard's metrics server is the same server */
	const char *colon = strrchr(c->shards[0].metrics, ':');
	assert_non_null(colon);
	int mport = atoi(colon + 1);
	auth_request(req, sizeof(req), "/metrics", "a", NULL);
	assert_int_equal(raw_status(mport, req), 200);
	auth_request(req, sizeof(req), "/metrics", "a", "b");
	assert_int_equal(raw_status(mport, req), 400);
	kvi_free(path);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_bad_input, clu_test_setup,
					    clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_admin_token, clu_test_setup,
					    clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_max_connections,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_two_authorizations,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_register_token, clu_test_setup,
					    clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_register_token_alone,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
