/*
 * test_ctl.c - kvindexctl from the outside: the real binary, run as a
 * subprocess (its standard output, standard error and exit status
 * captured), against a real cluster of two coordinator replicas with an
 * admin token (replica_check.h: the simulator, two shards, a Lease of the
 * test API server), driving every command:
 *
 *  - usage errors (2), --help, the coordinator unreachable (3), a token
 *    wrong (1, the API's message), absent (1) or unreadable (2), and the
 *    environment's KVINDEX_COORDINATOR and KVINDEX_TOKEN_FILE;
 *  - status on the leader, workers over several pages (--limit below the
 *    number of pods) with its filters, --json equal to the API's pages
 *    merged; register (flags and --file), unregister, their API errors;
 *  - query by tokens (standard input, a file) and by hashes, --json equal
 *    to the API's answer, routed;
 *  - shards add and drain (a third shard), move, moves, rebalance;
 *  - the follower: a registration through it reaches the leader (the 307
 *    followed with its method, body and token), status and the token
 *    checked there;
 *  - a shard killed: status shows it down.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hash.h"
#include "replica_check.h"

#define TOKEN  "ctl-admin-token"
#define RUN_MS 20000
#define N_OPS  4 /* pods registered by hand, model "paged" */
#define PAGE   2 /* instances a page of workers --limit */

typedef struct ctl_world {
	world w;
	int lead, follow;
	char *dir;
	char *token, *wrong, *missing, *tokens, *hashes;
	const char *extra[3];
	uint32_t prompt[NTOK];
} ctl_world;

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* What one run of kvindexctl did. */
typedef kvt_run run;

/* ctl_exec runs kvindexctl with args (NULL-ended), in (NULL: nothing) on
 * its standard input, and of the KVINDEX_ variables those of env alone
 * (NULL: none). */
static void
ctl_exec(ctl_world *t, run *r, const char *in, const char *const *env,
	 const char *const *args)
{
	const char *argv[48] = {KVI_CTL_BIN};
	int n = 1;
	while (args[n - 1] != NULL && n < 47) {
		argv[n] = args[n - 1];
		n++;
	}
	kvi_err rv = kvt_run_exec(argv, in, "KVINDEX_", env, t->dir, RUN_MS, r);
	if (rv != KVI_OK) {
		fail_msg("kvindexctl %s: %s", argv[1], kvi_strerror(rv));
	}
}

static void
run_fini(run *r)
{
	kvt_run_fini(r);
}

/* expect checks r's exit status and that its output and error hold out
 * and err (NULL: anything), then frees r unless keep. */
static void
expect_run(run *r, int status, const char *out, const char *err, bool keep)
{
	if (r->status != status || (out && !strstr(r->out, out)) ||
	    (err && !strstr(r->err, err))) {
		fail_msg("kvindexctl exit %d (wanted %d, \"%s\", \"%s\")\n"
			 "stdout:\n%s\nstderr:\n%s",
			 r->status, status, out ? out : "", err ? err : "",
			 r->out, r->err);
	}
	if (!keep) {
		run_fini(r);
	}
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
/* kvindexctl with the arguments, its output checked, then freed */
#define CTL(t, in, st, out, err, ...)                                          \
	do {                                                                   \
		run r_;                                                        \
		ctl_exec((t), &r_, (in), NULL, ARGS(__VA_ARGS__));             \
		expect_run(&r_, (st), (out), (err), false);                    \
	} while (0)
/* the same on the leader, with the admin token */
#define LEAD(t, in, st, out, err, ...)                                         \
	CTL((t), (in), (st), (out), (err), "--coordinator", base((t), true),   \
	    "--token-file", (t)->token, __VA_ARGS__)
/* kvindexctl on the leader with the token, the run kept in *r */
#define LEAD_RUN(t, r, in, ...)                                                \
	ctl_exec((t), (r), (in), NULL,                                         \
		 ARGS("--coordinator", base((t), true), "--token-file",        \
		      (t)->token, __VA_ARGS__))

static const char *
base(ctl_world *t, bool leader)
{
	return t->w.r[leader ? t->lead : t->follow].base;
}

/* api calls the leader's API with the admin token; fails unless want. */
static json_t *
api(ctl_world *t, const char *method, const char *path, const char *body,
    long want, kvt_http_resp *keep)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", base(t, true), path);
	kvt_http_resp r;
	assert_int_equal(kvt_http_request(method, url, body,
					  "Authorization: Bearer " TOKEN, 10000,
					  &r),
			 KVI_OK);
	if (r.status != want) {
		fail_msg("%s %s: %ld %s", method, path, r.status, r.body);
	}
	json_t *j = json_incref(r.json);
	if (keep != NULL) {
		*keep = r;
	} else {
		kvt_http_resp_fini(&r);
	}
	return j;
}

/* api_pages merges the pages of /workers?limit=PAGE into one array and
 * counts them in *pages. */
static json_t *
api_pages(ctl_world *t, int *pages)
{
	json_t *all = json_array();
	char cursor[32] = "";
	*pages = 0;
	for (;;) {
		char path[96];
		snprintf(path, sizeof(path), "/workers?limit=%d%s%s", PAGE,
			 cursor[0] ? "&cursor=" : "", cursor);
		kvt_http_resp r;
		json_t *page = api(t, "GET", path, NULL, 200, &r);
		json_array_extend(all, page);
		json_decref(page);
		(*pages)++;
		const char *h = strcasestr(r.headers, "X-Next-Cursor:");
		cursor[0] = '\0';
		if (h != NULL) {
			sscanf(h + 14, " %31[0-9]", cursor);
		}
		kvt_http_resp_fini(&r);
		if (cursor[0] == '\0') {
			return all;
		}
	}
}

static int
group_setup(void **state)
{
	ctl_world *t = calloc(1, sizeof(*t));
	*state = t;
	assert_int_equal(kvt_tmpdir_make("kvi-ctl", &t->dir), KVI_OK);
	t->token = kvt_path(t->dir, "token");
	t->wrong = kvt_path(t->dir, "wrong");
	t->missing = kvt_path(t->dir, "missing");
	t->tokens = kvt_path(t->dir, "tokens.json");
	t->hashes = kvt_path(t->dir, "hashes.txt");
	write_file(t->token, TOKEN "\n");
	write_file(t->wrong, "not-the-token\n");
	t->extra[0] = "--admin-token-file";
	t->extra[1] = t->token;
	t->lead = world_led_with(&t->w, 2, t->extra);
	t->follow = 1 - t->lead;
	return 0;
}

static int
group_teardown(void **state)
{
	ctl_world *t = *state;
	world_halt(&t->w);
	kvt_tmpdir_remove(t->dir);
	free(t->dir);
	free(t->token);
	free(t->wrong);
	free(t->missing);
	free(t->tokens);
	free(t->hashes);
	free(t);
	return 0;
}

static void
test_usage(void **state)
{
	ctl_world *t = *state;
	CTL(t, NULL, 0, "\nCommands:\n", NULL, "--help");
	CTL(t, NULL, 0, "shards drain", NULL, "--help");
	CTL(t, NULL, 0, "usage: kvindexctl status [--json]", NULL, "status",
	    "--help");
	CTL(t, NULL, 2, NULL, "kvindexctl: no command", "--timeout-ms", "5");
	CTL(t, NULL, 2, NULL, "frobnicate is not a command", "frobnicate");
	CTL(t, NULL, 2, NULL, "--limit: 0 is not a number in 1..100000",
	    "workers", "--limit", "0");
	CTL(t, NULL, 2, NULL, "--state: sleepy is not pending", "workers",
	    "--state", "sleepy");
	CTL(t, NULL, 2, NULL, "--model is required", "query");
	CTL(t, NULL, 2, NULL, "takes 2 arguments, not 1", "move", "a");
	CTL(t, NULL, 2, NULL, "ftp://x is not an http:// or https:// URL",
	    "--coordinator", "ftp://x", "workers");
	CTL(t, NULL, 2, NULL, "unrecognized option", "--nope", "status");
	CTL(t, NULL, 2, NULL, "takes 1 argument, not 0", "shards", "add");
}

static void
test_unreachable(void **state)
{
	ctl_world *t = *state;
	int port;
	int fd = kvt_port_refusing(&port);
	assert_true(fd >= 0);
	char url[64], env[96];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	CTL(t, NULL, 3, "", "cannot reach http://127.0.0.1:", "--coordinator",
	    url, "workers");
	/* the environment's coordinator, and its token file */
	snprintf(env, sizeof(env), "KVINDEX_COORDINATOR=%s", url);
	run r;
	ctl_exec(t, &r, NULL, ARGS(env), ARGS("status"));
	expect_run(&r, 3, "", url, false);
	close(fd);
}

static void
test_token(void **state)
{
	ctl_world *t = *state;
	const char *lead = base(t, true);
	CTL(t, NULL, 1, "", "kvindexctl: wrong admin token (HTTP 403)",
	    "--coordinator", lead, "--token-file", t->wrong, "status");
	CTL(t, NULL, 1, "",
	    "admin paths need Authorization: Bearer <the admin token> "
	    "(HTTP 401)",
	    "--coordinator", lead, "moves");
	CTL(t, NULL, 2, "", "token file", "--coordinator", lead, "--token-file",
	    t->missing, "status");
	/* a read sends no token, and so reads no file */
	CTL(t, NULL, 0, "sim/pod-0", "", "--coordinator", lead, "--token-file",
	    t->missing, "workers");
	char coord[96], tok[512];
	snprintf(coord, sizeof(coord), "KVINDEX_COORDINATOR=%s", lead);
	snprintf(tok, sizeof(tok), "KVINDEX_TOKEN_FILE=%s", t->token);
	run r;
	ctl_exec(t, &r, NULL, ARGS(coord, tok), ARGS("moves"));
	expect_run(&r, 0, "LISTENER", "", false);
	/* the flag wins over the environment */
	ctl_exec(t, &r, NULL, ARGS(coord, tok),
		 ARGS("--token-file", t->wrong, "moves"));
	expect_run(&r, 1, "", "wrong admin token", false);
}

static void
test_status(void **state)
{
	ctl_world *t = *state;
	char want[256];
	snprintf(want, sizeof(want), "coordinator  %s  %s, the leader\n",
		 base(t, true), t->w.r[t->lead].identity);
	LEAD(t, NULL, 0, want, "", "status");
	snprintf(want, sizeof(want), "leader       %s  %s  epoch ",
		 t->w.r[t->lead].identity, base(t, true));
	LEAD(t, NULL, 0, want, "", "status");
	run r;
	LEAD_RUN(t, &r, NULL, "status");
	expect_run(&r, 0, "\nSHARD    STATUS  LISTENERS  STATES  ", NULL, true);
	assert_non_null(strstr(r.out, "\nshard-0  up  "));
	assert_non_null(strstr(r.out, "\nshard-1  up  "));
	int active = 0;
	for (const char *p = r.out; (p = strstr(p, "active=")) != NULL; p++) {
		active += atoi(p + 7);
	}
	assert_int_equal(active, FILE_PODS * DP);
	run_fini(&r);
	LEAD_RUN(t, &r, NULL, "status", "--json");
	expect_run(&r, 0, NULL, "", true);
	json_t *j = kvt_json_loads(r.out, strlen(r.out));
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(j, "leader"), "identity")),
			    t->w.r[t->lead].identity);
	assert_int_equal(json_array_size(json_object_get(j, "shards")), 2);
	assert_int_equal(json_array_size(json_object_get(j, "workers")),
			 FILE_PODS);
	json_decref(j);
	run_fini(&r);
}

/* ops_register registers ops/pod-i over the leader, model "paged". */
static void
ops_register(ctl_world *t, int i, int block_size, int status, const char *out,
	     const char *err)
{
	char name[32], port[16], bs[16];
	snprintf(name, sizeof(name), "ops/pod-%d", i);
	snprintf(port, sizeof(port), "%d", 41000 + 2 * i);
	snprintf(bs, sizeof(bs), "%d", block_size);
	LEAD(t, NULL, status, out, err, "register", "--name", name, "--ip",
	     "127.0.0.1", "--model", "paged", "--block-size", bs, "--dp-size",
	     "2", "--zmq-port", port);
}

static void
test_register(void **state)
{
	ctl_world *t = *state;
	for (int i = 0; i < N_OPS; i++) {
		char want[96];
		snprintf(want, sizeof(want), "registered ops/pod-%d (instance ",
			 i);
		ops_register(t, i, 16, 0, want, "");
	}
	ops_register(t, 0, 16, 0, " (registered already)\n", "");
	ops_register(t, 9, 32, 1, "",
		     "model paged has block_size 16 here, not 32 (HTTP 409)");
	char *file = kvt_path(t->dir, "rank.json");
	write_file(file, "{\"instance_id\": 4242, \"endpoint\": "
			 "\"tcp://127.0.0.1:43000\", \"model_name\": "
			 "\"paged\", \"block_size\": 16}");
	LEAD(t, NULL, 0, "registered (instance 4242): 4242#0\n", "", "register",
	     "--file", file);
	LEAD(t, NULL, 2, "", "not both", "register", "--file", file, "--name",
	     "a/b");
	free(file);
	LEAD(t, NULL, 2, "", "missing: No such file", "register", "--file",
	     t->missing);
	LEAD(t, NULL, 2, "", "are required", "register", "--name", "a/b");
	LEAD(t, NULL, 2, "", "--block-size: 0 is not a number", "register",
	     "--block-size", "0");
	LEAD(t, "{\"name\": 7}", 1, "", "(HTTP 400)", "register", "--file",
	     "-");
	LEAD(t, NULL, 0, "unregistered 4242#0\n", "", "unregister",
	     "--instance-id", "4242", "--model", "paged");
	LEAD(t, NULL, 1, "",
	     "kvindexctl: pod no/such-pod is not registered (HTTP 404)",
	     "unregister", "--name", "no/such-pod");
	LEAD(t, NULL, 2, "", "give --name, or", "unregister", "--name", "a/b",
	     "--dp-rank", "1");
}

/* count counts the lines of text that hold word. */
static int
count(const char *text, const char *word)
{
	int n = 0;
	for (const char *l = text; l != NULL && *l != '\0';) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char *line = strndup(l, len);
		n += strstr(line, word) != NULL;
		free(line);
		l = nl ? nl + 1 : NULL;
	}
	return n;
}

static void
test_workers(void **state)
{
	ctl_world *t = *state;
	char limit[8];
	snprintf(limit, sizeof(limit), "%d", PAGE);
	/* --json: the pages merged, as the API gives them (read again
	 * when a listener changed in between) */
	bool same = false;
	for (int tries = 0; tries < 10 && !same; tries++) {
		run r;
		LEAD_RUN(t, &r, NULL, "workers", "--limit", limit, "--json");
		expect_run(&r, 0, NULL, "", true);
		json_t *got = kvt_json_loads(r.out, strlen(r.out));
		int pages;
		json_t *want = api_pages(t, &pages);
		assert_int_equal(json_array_size(want), FILE_PODS + N_OPS);
		assert_true(pages >= 3); /* paging was followed */
		same = got != NULL && json_equal(got, want);
		json_decref(got);
		json_decref(want);
		run_fini(&r);
	}
	assert_true(same);
	run r;
	LEAD_RUN(t, &r, NULL, "workers", "--model", "paged", "--limit", "3");
	expect_run(&r, 0, "POD ", "", true);
	assert_int_equal(count(r.out, "ops/pod-"), 2 * N_OPS);
	assert_int_equal(count(r.out, "sim/pod-"), 0);
	assert_non_null(strstr(r.out, "LAST_ERROR\n"));
	run_fini(&r);
	LEAD_RUN(t, &r, NULL, "workers", "--pod", "ops/pod-3");
	expect_run(&r, 0, "ops/pod-3  paged  0", "", true);
	assert_int_equal(count(r.out, "ops/pod-3"), 2);
	run_fini(&r);
	LEAD_RUN(t, &r, NULL, "workers", "--state", "active", "--limit", "1");
	expect_run(&r, 0, NULL, "", true);
	assert_int_equal(count(r.out, "sim/pod-"), FILE_PODS * DP);
	assert_int_equal(count(r.out, "ops/pod-"), 0);
	run_fini(&r);
	LEAD_RUN(t, &r, NULL, "workers", "--state", "active", "--json");
	expect_run(&r, 0, NULL, "", true);
	json_t *act = kvt_json_loads(r.out, strlen(r.out));
	assert_int_equal(json_array_size(act), FILE_PODS);
	json_decref(act);
	run_fini(&r);
	for (int i = 0; i < N_OPS; i++) {
		char name[32], want[64];
		snprintf(name, sizeof(name), "ops/pod-%d", i);
		snprintf(want, sizeof(want), "unregistered ops/pod-%d#", i);
		LEAD(t, NULL, 0, want, "", "unregister", "--name", name);
	}
}

/* same_as_api says whether kvindexctl's --json answer (r's output) is the
 * API's answer to path with body. */
static bool
same_as_api(ctl_world *t, const run *r, const char *path, const char *body)
{
	json_t *got = kvt_json_loads(r->out, strlen(r->out));
	json_t *want = api(t, "POST", path, body, 200, NULL);
	bool same = got != NULL && json_equal(got, want);
	json_decref(got);
	json_decref(want);
	return same;
}

/* first_row returns the first line of the table in out, after its
 * header (which follows the answer's first line). */
static char *
first_row(const char *out)
{
	const char *h = strstr(out, "\nPOD ");
	assert_non_null(h);
	const char *row = strchr(h + 1, '\n');
	assert_non_null(row);
	return strndup(row + 1, strcspn(row + 1, "\n"));
}

static void
test_query(void **state)
{
	ctl_world *t = *state;
	tokens(t->prompt, 1, 7); /* rank 1: sim/pod-0, dp rank 1 */
	clu_prefill(&t->w.c, 0, 1, t->prompt, NTOK);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (matched(&t->w, t->lead, t->prompt, 1) != NTOK) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	char *text = clu_tokens_text(t->prompt, NTOK);
	write_file(t->tokens, text);
	uint64_t h[NTOK / 16];
	size_t nb = kvi_local_hashes(t->prompt, NTOK, 16,
				     kvi_local_seed(NULL, 0, NULL, 0), h);
	char hashes[256] = "", hbody[512];
	for (size_t k = 0; k < nb; k++) {
		size_t used = strlen(hashes);
		snprintf(hashes + used, sizeof(hashes) - used, "%" PRIu64 "\n",
			 h[k]);
	}
	write_file(t->hashes, hashes);
	snprintf(hbody, sizeof(hbody),
		 "{\"model_name\":\"sim-model\",\"block_hashes\":[\"%" PRIu64
		 "\",\"%" PRIu64 "\",\"%" PRIu64 "\",\"%" PRIu64 "\"]}",
		 h[0], h[1], h[2], h[3]);
	char tbody[2048];
	snprintf(tbody, sizeof(tbody),
		 "{\"model_name\":\"sim-model\",\"token_ids\":%s}", text);
	/* by tokens on standard input, by a file, by hashes */
	run r;
	LEAD_RUN(t, &r, text, "query", "--model", "sim-model");
	expect_run(&r, 0,
		   "sim-model: 4 blocks of 16 tokens; 2 of 2 shards answered\n",
		   "", true);
	char *row = first_row(r.out);
	assert_string_equal(row, "sim/pod-0  1     64       64   0    0     0");
	free(row);
	run_fini(&r);
	LEAD_RUN(t, &r, NULL, "query", "--model", "sim-model", "--hashes",
		 t->hashes, "--top-k", "1");
	expect_run(&r, 0, "\nsim/pod-0  1     64", "", true);
	run_fini(&r);
	bool same = false, same_h = false;
	for (int tries = 0; tries < 5 && !(same && same_h); tries++) {
		LEAD_RUN(t, &r, NULL, "query", "--model", "sim-model",
			 "--tokens-file", t->tokens, "--json");
		expect_run(&r, 0, NULL, "", true);
		same = same_as_api(t, &r, "/query", tbody);
		run_fini(&r);
		LEAD_RUN(t, &r, NULL, "query", "--model", "sim-model",
			 "--hashes", t->hashes, "--json");
		expect_run(&r, 0, NULL, "", true);
		same_h = same_as_api(t, &r, "/query_by_hash", hbody);
		run_fini(&r);
	}
	assert_true(same && same_h);
	/* the API's refusals, and input that is not a prompt */
	LEAD(t, "[1, -5]", 1, "", "token_ids[1]: -5 is not a u32 (HTTP 400)",
	     "query", "--model", "sim-model");
	LEAD(t, NULL, 1, "", "model nope is not served by any registered pod",
	     "query", "--model", "nope", "--tokens-file", t->tokens);
	LEAD(t, "tokens", 2, "", "standard input: not a JSON array", "query",
	     "--model", "sim-model");
	LEAD(t, NULL, 2, "", "not both", "query", "--model", "sim-model",
	     "--tokens-file", t->tokens, "--hashes", t->hashes);
	/* routed: pending on sim/pod-1 rank 0, which query then shows */
	LEAD(t, NULL, 0, "sim/pod-1#0: 0 blocks held, 4 pending, ", "",
	     "routed", "--model", "sim-model", "--pod", "sim/pod-1",
	     "--dp-rank", "0", "--tokens-file", t->tokens);
	LEAD(t, text, 0, "\nsim/pod-1  0     0        0    0    0     64\n", "",
	     "query", "--model", "sim-model");
	LEAD(t, NULL, 2, "", "are required", "routed", "--model", "sim-model");
	free(text);
}

/* owner returns the shard that owns listener key, per the leader
 * (NULL: none), in buf. */
static const char *
owner(ctl_world *t, const char *key, char *buf, size_t len)
{
	json_t *m = clu_owner_map(on(&t->w, t->lead));
	const char *o = json_string_value(json_object_get(m, key));
	snprintf(buf, len, "%s", o ? o : "");
	json_decref(m);
	return buf[0] ? buf : NULL;
}

/* settled says whether the leader has no move in flight, and off
 * listeners off the shard hashing picks (pinned elsewhere). */
static bool
settled(ctl_world *t, size_t off)
{
	json_t *rb = api(t, "POST", "/admin/rebalance", "{}", 200, NULL);
	json_t *mv = api(t, "GET", "/admin/moves", NULL, 200, NULL);
	bool idle = json_array_size(json_object_get(rb, "moves")) == off;
	size_t i;
	json_t *m;
	json_array_foreach(mv, i, m)
	{
		idle &= strcmp(json_string_value(json_object_get(m, "phase")),
			       "done") == 0;
	}
	json_decref(rb);
	json_decref(mv);
	return idle;
}

static void
wait_settled(ctl_world *t, size_t off)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!settled(t, off)) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	clu_wait_active(on(&t->w, t->lead), FILE_PODS * DP, CLU_WAIT_MS);
}

static void
test_admin(void **state)
{
	ctl_world *t = *state;
	cluster *c = &t->w.c;
	shc_start(&c->shards[2], NULL);
	c->n_shards = 3; /* stopped with the others */
	char add[160], want[200];
	snprintf(add, sizeof(add), "shard-2=%s", c->shards[2].url);
	snprintf(want, sizeof(want), "added shard-2 (%s)", c->shards[2].url);
	LEAD(t, NULL, 0, want, "", "shards", "add", add);
	LEAD(t, NULL, 1, "", "shard shard-2 exists already (HTTP 409)",
	     "shards", "add", add);
	LEAD(t, NULL, 2, "", "shard-2 is not ID=URL", "shards", "add",
	     "shard-2");
	wait_settled(t, 0);
	/* pin a listener off the shard hashing picks for it */
	char was[32], now[32];
	assert_non_null(owner(t, "sim/pod-0#0", was, sizeof(was)));
	const char *to = strcmp(was, "shard-2") == 0 ? "shard-0" : "shard-2";
	snprintf(want, sizeof(want), "moving sim/pod-0#0 from %s to %s", was,
		 to);
	LEAD(t, NULL, 0, want, "", "move", "sim/pod-0#0", to);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!owner(t, "sim/pod-0#0", now, sizeof(now)) ||
	       strcmp(now, to) != 0) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	wait_settled(t, 1);
	run r;
	LEAD_RUN(t, &r, NULL, "moves");
	expect_run(&r, 0, "LISTENER     FROM", "", true);
	snprintf(want, sizeof(want), "\nsim/pod-0#0  %s  %s  done", was, to);
	assert_non_null(strstr(r.out, want));
	run_fini(&r);
	LEAD_RUN(t, &r, NULL, "moves", "--json");
	expect_run(&r, 0, NULL, "", true);
	json_t *got = kvt_json_loads(r.out, strlen(r.out));
	json_t *api_moves = api(t, "GET", "/admin/moves", NULL, 200, NULL);
	assert_int_equal(json_array_size(got), json_array_size(api_moves));
	assert_true(json_array_size(got) >= 1);
	json_decref(got);
	json_decref(api_moves);
	run_fini(&r);
	snprintf(want, sizeof(want), "\nsim/pod-0#0  %s  %s\n", to, was);
	LEAD(t, NULL, 0, "listeners off the shard hashing picks: 1 ", NULL,
	     "rebalance");
	LEAD(t, NULL, 0, want, "", "rebalance");
	LEAD(t, NULL, 0, "listeners unpinned: 1;", "", "rebalance", "--apply");
	wait_settled(t, 0);
	LEAD(t, NULL, 0, "every listener is on the shard hashing picks\n", "",
	     "rebalance");
	LEAD(t, NULL, 0, "draining shard-2: its ", "", "shards", "drain",
	     "shard-2");
	LEAD(t, NULL, 1, "", "no shard \"nope\" (HTTP 404)", "shards", "drain",
	     "nope");
	LEAD(t, NULL, 1, "", "no listener \"nope#0\" (HTTP 404)", "move",
	     "nope#0", "shard-0");
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		LEAD_RUN(t, &r, NULL, "status");
		expect_run(&r, 0, NULL, "", true);
		bool gone = strstr(r.out, "\nshard-2 ") == NULL;
		run_fini(&r);
		if (gone) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(200);
	}
	wait_settled(t, 0);
}

static void
test_follower(void **state)
{
	ctl_world *t = *state;
	const char *f = base(t, false);
	/* the follower redirects a registration... */
	char body[512];
	reg_body(&t->w, 2, body, sizeof(body));
	kvt_http_resp h;
	char url[128];
	snprintf(url, sizeof(url), "%s/register", f);
	assert_int_equal(kvt_http_request("POST", url, body,
					  "Authorization: Bearer " TOKEN, 10000,
					  &h),
			 KVI_OK);
	assert_int_equal(h.status, 307);
	kvt_http_resp_fini(&h);
	/* ...which kvindexctl follows with its method, body and token */
	const kvt_sim *sim = &t->w.c.sim;
	char zmq[16], replay[16], recover[16];
	snprintf(zmq, sizeof(zmq), "%d", sim->zmq_port[2 * DP]);
	snprintf(replay, sizeof(replay), "%d", sim->replay_port[2 * DP]);
	snprintf(recover, sizeof(recover), "%d", sim->recover_port[2 * DP]);
	CTL(t, NULL, 0, "registered sim/pod-2 (instance ", "", "--coordinator",
	    f, "--token-file", t->token, "register", "--name", "sim/pod-2",
	    "--ip", "127.0.0.1", "--model", "sim-model", "--block-size", "16",
	    "--dp-size", "2", "--zmq-port", zmq, "--replay-port", replay,
	    "--recover-port", recover);
	clu_wait_active(on(&t->w, t->lead), (FILE_PODS + 1) * DP, CLU_WAIT_MS);
	char want[256];
	snprintf(want, sizeof(want),
		 "coordinator  %s  %s, a follower\nleader       %s  %s  epoch ",
		 f, t->w.r[t->follow].identity, t->w.r[t->lead].identity,
		 base(t, true));
	CTL(t, NULL, 0, want, "", "--coordinator", f, "--token-file", t->token,
	    "status");
	CTL(t, NULL, 1, "", "wrong admin token (HTTP 403)", "--coordinator", f,
	    "--token-file", t->wrong, "moves");
	CTL(t, NULL, 0, "sim/pod-2  sim-model", "", "--coordinator", f,
	    "workers", "--pod", "sim/pod-2");
	CTL(t, NULL, 0, "unregistered sim/pod-2#", "", "--coordinator", f,
	    "--token-file", t->token, "unregister", "--name", "sim/pod-2");
	assert_false(workers_has(&t->w, t->lead, "sim/pod-2"));
}

static void
test_shard_down(void **state)
{
	ctl_world *t = *state;
	shc_kill9(&t->w.c.shards[1]);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		run r;
		LEAD_RUN(t, &r, NULL, "status");
		expect_run(&r, 0, NULL, "", true);
		bool down = strstr(r.out, "\nshard-1  down  ") != NULL;
		bool up = strstr(r.out, "\nshard-0  up  ") != NULL;
		run_fini(&r);
		if (down && up) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(200);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_usage),    cmocka_unit_test(test_unreachable),
	    cmocka_unit_test(test_token),    cmocka_unit_test(test_status),
	    cmocka_unit_test(test_register), cmocka_unit_test(test_workers),
	    cmocka_unit_test(test_query),    cmocka_unit_test(test_admin),
	    cmocka_unit_test(test_follower), cmocka_unit_test(test_shard_down),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
