/*
 * bench_query - the /query path of kvindex beside two anchors, measured in
 * one run with the same load generator, request bodies and connections.
 *
 *   kvindex    the cluster of bench_coord: kvindex-sim (--pods P, DP=2:
 *              2P listeners, the conversation trace), two kvindex-shard
 *              processes and kvindex-coordinator, filled to --entries
 *              (block, listener) entries, then the load paused;
 *   floor      an HTTP server on common/httpd answering every request
 *              with a canned body as long as kvindex's answer to it: the
 *              limit of HTTP on this machine;
 *   redis      an index in Redis as llm-d's KV cache manager keeps one (a
 *              hash per block, a field per listener and tier), filled with the
 *              simulator's ground truth, i.e. exactly what kvindex holds,
 *              behind an HTTP front that parses, hashes, pipelines one
 *              HKEYS per block and answers in the same shape;
 *              redis-aof is the same with appendonly yes (everysec).
 *
 * Queries, each in two answer forms (full: every listener with a match;
 * top8: "top_k": 8): trace prompts at their real lengths (hash ids x 32
 * blocks x 16 tokens), and 100- and 1,000-block prompts (a trace prompt's
 * first blocks, padded with fresh tokens); --bodies of each, from the
 * trace's first requests, cycled by the load. Each is sent in two request
 * body forms: json, {"model_name": M, "token_ids": [...], "top_k": 8?},
 * and packed, the compact form (bench_query_packed.h):
 *
 *   POST /query?model_name=<percent-escaped M>[&top_k=8]
 *   Content-Type: application/octet-stream
 *   body: the token ids, each a little-endian u32, 4 bytes a token
 *
 * kvindex and the floor take both; the Redis front takes JSON only, so
 * packed rows have no Redis lines (and "-" for kvindex over Redis).
 *
 * Before measuring it sends every body to kvindex once, keeps the
 * answers' lengths for the floor, and checks, for the first --check
 * bodies of every set, that kvindex's answer to a packed body is byte for
 * byte its answer to the JSON body of the same prompt (the JSON bodies
 * are sent for that even when only packed is measured), and that the
 * Redis index's answers to the JSON bodies name the same listeners with
 * the same matched_blocks; any difference fails the run. Then, for every
 * kind, answer form, body form and number of connections, it runs each
 * server for --seconds (after a short warm-up) and reads the CPU time of
 * its processes (coordinator and shards; floor; front and redis-server)
 * from /proc around the phase.
 *
 * It prints one table (a row per kind, answer form, body form with its
 * mean request body bytes, connections and server; last, the CPU per
 * query of each process), writes it with its data and a gnuplot plot of
 * latency against throughput (packed rows in dash-dot lines) to --out
 * (default: a new directory, named), and exits 0 only when every server
 * answered every request with 200 and the checks passed.
 *
 *   bench_query [--pods P] [--entries N] [--seconds S] [--conns 1,4,16,64]
 *               [--queries trace,100,1000] [--forms full,top8]
 *               [--bodies-form json,packed] [--no-redis]
 *               [--shard-url-scheme tcp|ipc] [--out DIR]
 *               [--http-threads T] [--bodies N] [--check N]
 *
 * Defaults: 100 pods (200 listeners), 1,000,000 entries, 2 s per phase,
 * every kind, form, body form and number of connections above, tcp, 2
 * HTTP loop threads for the coordinator, the floor and the front alike,
 * 256 bodies per set, 32 of them checked: about six minutes on two cores.
 * The servers re-run this program with --serve-floor or
 * --serve-redis-front.
 *
 * Every process shares the machine's cores with the load generator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_query_bodies.h"
#include "bench_query_check.h"
#include "bench_query_cluster.h"
#include "bench_query_front.h"
#include "bench_query_load.h"
#include "bench_query_options.h"
#include "bench_query_packed.h"
#include "bench_query_proc.h"
#include "bench_query_redis.h"
#include "bench_query_report.h"
#include "kvitest.h"

#define TRACE KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define BS    16
#define BPI   32 /* blocks per trace hash id */
#define MODEL "sim-model"
#define TOP_K 8

static const uint32_t kind_blocks[BQ_KINDS] = {0, 100, 1000}; /* 0: real */

/* A body set with kvindex's answers to it. */
typedef struct query_set {
	bq_bodies b;
	uint32_t top_k;
	bool packed;
	bool measured; /* else only sent for the check of its packed twin */
	const struct query_set *json; /* packed: the JSON set of its prompts */
	size_t *answer_len;
	char **answer; /* the first `check` answers, kept for the check */
	size_t check;
	size_t errors;
	double body_bytes; /* mean request body bytes */
} query_set;

/* Everything a run starts. */
typedef struct run {
	bq_options o;
	char *dir, *out;
	bq_cluster cluster;
	kvt_proc *floor, *front[2];
	bq_redis redis[2];
	int port[BQ_SERVERS];
	pid_t pids[BQ_SERVERS][BQ_MAX_PIDS];
	int n_pids[BQ_SERVERS];
	query_set *sets;
	size_t n_sets;
} run;

/* ---- request bodies ------------------------------------------------------ */

/* add_set adds to r the set of kind k, answer form f and body form b. */
static query_set *
add_set(run *r, int k, int f, int b)
{
	query_set *q = &r->sets[r->n_sets++];
	*q = (query_set){.top_k = f == 1 ? TOP_K : 0,
			 .packed = b == BQ_PACKED,
			 .measured = r->o.body[b]};
	q->b.kind = bq_kind_names[k];
	q->b.form = bq_form_names[f];
	q->b.body_form = bq_body_names[b];
	return q;
}

/* build_kind adds one set per chosen answer form and body form of query
 * kind k to r, and the JSON set a packed one is checked against. */
static void
build_kind(run *r, int k)
{
	bq_bodies_spec spec = {.trace = TRACE,
			       .block_size = BS,
			       .blocks_per_id = BPI,
			       .blocks = kind_blocks[k],
			       .n = r->o.bodies,
			       .model = MODEL};
	bq_bodies *out[BQ_FORMS * BQ_BODIES];
	bq_body_form bf[BQ_FORMS * BQ_BODIES];
	size_t n = 0;
	for (int f = 0; f < BQ_FORMS; f++) {
		if (!r->o.form[f]) {
			continue;
		}
		query_set *json = add_set(r, k, f, BQ_JSON);
		bf[n] = (bq_body_form){.top_k = json->top_k};
		out[n++] = &json->b;
		if (r->o.body[BQ_PACKED]) {
			query_set *q = add_set(r, k, f, BQ_PACKED);
			q->json = json;
			bf[n] =
			    (bq_body_form){.top_k = q->top_k, .packed = true};
			out[n++] = &q->b;
		}
	}
	char err[256];
	if (bq_bodies_build(&spec, bf, out, n, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "trace: %s\n", err);
		exit(1);
	}
}

static void
build_sets(run *r)
{
	r->sets =
	    kvi_calloc(BQ_KINDS * BQ_FORMS * BQ_BODIES, sizeof(query_set));
	for (int k = 0; k < BQ_KINDS; k++) {
		if (r->o.kind[k]) {
			build_kind(r, k);
		}
	}
	uint32_t id = 0;
	for (size_t i = 0; i < r->n_sets; i++) {
		query_set *q = &r->sets[i];
		size_t bytes = 0;
		for (size_t j = 0; j < q->b.n; j++) {
			bytes += q->b.len[j];
		}
		q->body_bytes = q->b.n ? (double)bytes / (double)q->b.n : 0;
		q->b.id_base = id;
		id += (uint32_t)q->b.n;
	}
}

static void
sets_free(run *r)
{
	for (size_t i = 0; i < r->n_sets; i++) {
		query_set *q = &r->sets[i];
		bq_bodies_fini(&q->b);
		for (size_t j = 0; j < q->check && q->answer; j++) {
			kvi_free(q->answer[j]);
		}
		kvi_free(q->answer_len);
		kvi_free(q->answer);
	}
	kvi_free(r->sets);
}

/* ---- kvindex's answers, and the anchors ---------------------------------- */

static void
on_kvindex_answer(void *arg, size_t i, int status, const char *body, size_t len)
{
	query_set *q = arg;
	q->answer_len[i] = len;
	if (status != 200 && q->errors++ == 0) {
		fprintf(stderr,
			"kvindex answered %d to %s/%s/%s body %zu: %.*s\n",
			status, q->b.kind, q->b.form, q->b.body_form, i,
			(int)(len < 200 ? len : 200), body);
	}
	if (i < q->check) {
		q->answer[i] = kvi_strndup(body, len);
	}
}

static size_t *
iota(size_t n)
{
	size_t *v = kvi_calloc(n + 1, sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		v[i] = i;
	}
	return v;
}

/* collect_answers sends every body to kvindex once and writes the
 * answers' lengths, in X-Bench-Req order, to the floor's lengths file. */
static bool
collect_answers(run *r, const char *lengths_path)
{
	size_t *all = iota(r->o.bodies);
	bool ok = true;
	for (size_t s = 0; s < r->n_sets && ok; s++) {
		query_set *q = &r->sets[s];
		q->answer_len = kvi_calloc(q->b.n + 1, sizeof(size_t));
		q->answer = kvi_calloc(r->o.check + 1, sizeof(char *));
		q->check = r->o.check < q->b.n ? r->o.check : q->b.n;
		ok = bq_load_each(r->port[BQ_KVINDEX], &q->b, all, q->b.n,
				  on_kvindex_answer, q) == KVI_OK &&
		     q->errors == 0;
		if (!ok) {
			fprintf(stderr, "kvindex failed %s/%s/%s queries\n",
				q->b.kind, q->b.form, q->b.body_form);
		}
	}
	kvi_free(all);
	FILE *f = ok ? fopen(lengths_path, "w") : NULL;
	for (size_t s = 0; f != NULL && s < r->n_sets; s++) {
		for (size_t i = 0; i < r->sets[s].b.n; i++) {
			fprintf(f, "%zu\n", r->sets[s].answer_len[i]);
		}
	}
	return f != NULL && fclose(f) == 0;
}

/* check_packed compares kvindex's answers to the first --check bodies of
 * every packed set with its answers to the JSON bodies of the same
 * prompts: they must be the same bytes. */
static bool
check_packed(const run *r)
{
	size_t compared = 0, bad = 0;
	for (size_t i = 0; i < r->n_sets; i++) {
		const query_set *q = &r->sets[i], *j = q->json;
		if (j == NULL) {
			continue;
		}
		char name[64];
		snprintf(name, sizeof(name), "%s/%s", q->b.kind, q->b.form);
		size_t n = q->check < j->check ? q->check : j->check;
		bad += bq_packed_compare(name, j->answer, j->answer_len,
					 q->answer, q->answer_len, n);
		compared += n;
	}
	if (compared > 0) {
		printf("check: kvindex packed against json: answers=%zu "
		       "mismatches=%zu\n",
		       compared, bad);
	}
	return bad == 0;
}

/* start_self runs this program as server name with the NULL-terminated
 * args (at most 8), then the port file and the loop threads; its log and
 * port file go in the run's directory. Returns its port, or -1. */
static int
start_self(run *r, const char *name, const char **args, kvt_proc **p)
{
	char self[4096], file[64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		return -1;
	}
	self[n] = '\0';
	snprintf(file, sizeof(file), "%s.port", name);
	char *port_file = kvt_path(r->dir, file);
	snprintf(file, sizeof(file), "%s.log", name);
	char *log = kvt_path(r->dir, file);
	const char *argv[12] = {self};
	int k = 1;
	for (; args[k - 1] != NULL && k < 9; k++) {
		argv[k] = args[k - 1];
	}
	argv[k++] = port_file;
	char threads[8];
	snprintf(threads, sizeof(threads), "%d", r->o.http_threads);
	argv[k++] = threads;
	int port = -1;
	if (kvt_proc_start(argv, log, p) == KVI_OK) {
		port = bq_port_file_wait(port_file, 10000);
	}
	if (port < 0) {
		fprintf(stderr, "%s did not start: see %s\n", name, log);
	}
	kvi_free(port_file);
	kvi_free(log);
	return port;
}

static bool
start_floor(run *r, const char *lengths_path)
{
	const char *args[] = {"--serve-floor", lengths_path, NULL};
	r->port[BQ_FLOOR] = start_self(r, "floor", args, &r->floor);
	r->pids[BQ_FLOOR][0] = kvt_proc_pid(r->floor);
	r->n_pids[BQ_FLOOR] = 1;
	return r->port[BQ_FLOOR] > 0;
}

/* start_redis starts redis-server with AOF off (a = 0) or on, fills it
 * with t and starts its front. */
static bool
start_redis(run *r, const char *bin, int a, const bq_truth *t,
	    const bq_holders *hs)
{
	bq_redis *rd = &r->redis[a];
	double secs;
	if (bq_redis_start(bin, r->dir, a == 1, rd) != KVI_OK ||
	    bq_redis_ingest(rd, t, hs, MODEL, &secs) != KVI_OK) {
		fprintf(stderr, "redis: ingest failed\n");
		return false;
	}
	printf("%s: ingest entries=%zu seconds=%.2f hset_per_s=%.0f\n",
	       bq_server_name(BQ_REDIS + a), t->n, secs,
	       secs > 0 ? (double)t->n / secs : 0);
	char port[16], bs[8];
	snprintf(port, sizeof(port), "%d", rd->port);
	snprintf(bs, sizeof(bs), "%d", BS);
	const char *args[] = {"--serve-redis-front", r->cluster.sim.layout_path,
			      port, bs, NULL};
	bq_server s = BQ_REDIS + a;
	r->port[s] =
	    start_self(r, a ? "front-aof" : "front", args, &r->front[a]);
	r->pids[s][0] = kvt_proc_pid(r->front[a]);
	r->pids[s][1] = kvt_proc_pid(rd->proc);
	r->n_pids[s] = 2;
	return r->port[s] > 0;
}

static bool
start_redis_side(run *r)
{
	char *bin = bq_which("redis-server");
	bq_truth t = {0};
	bq_holders hs = {0};
	bool ok = bin != NULL;
	if (!ok) {
		fprintf(stderr,
			"redis-server is not on PATH (or --no-redis)\n");
	}
	ok = ok && bq_truth_read(&r->cluster.sim, &t) == KVI_OK &&
	     bq_holders_load(r->cluster.sim.layout_path, &hs) == KVI_OK &&
	     hs.n == (size_t)r->cluster.sim.n;
	if (bin != NULL && !ok) {
		fprintf(stderr, "redis: cannot read the simulator's truth\n");
	}
	if (ok) {
		printf("truth: entries=%zu (kvindex holds %.0f)\n", t.n,
		       r->cluster.entries);
	}
	for (int a = 0; a < 2 && ok; a++) {
		ok = start_redis(r, bin, a, &t, &hs);
	}
	bq_truth_fini(&t);
	bq_holders_fini(&hs);
	kvi_free(bin);
	return ok;
}

/* ---- the agreement check --------------------------------------------- */

typedef struct check_ctx {
	const query_set *q;
	const char *server;
	size_t compared, bad, pairs;
} check_ctx;

static void
on_redis_answer(void *arg, size_t i, int status, const char *body, size_t len)
{
	check_ctx *c = arg;
	const query_set *q = c->q;
	char why[256] = "status not 200";
	c->compared++;
	if (status == 200 &&
	    bq_check_answer(q->answer[i], q->answer_len[i], body, len, q->top_k,
			    &c->pairs, why, sizeof(why))) {
		return;
	}
	if (c->bad++ < 5) {
		fprintf(stderr, "check: %s %s/%s body %zu: %s\n", c->server,
			q->b.kind, q->b.form, i, why);
	}
}

static bool
check_redis(run *r, bq_server s)
{
	check_ctx c = {.server = bq_server_name(s)};
	size_t *all = iota(r->o.check);
	for (size_t i = 0; i < r->n_sets; i++) {
		c.q = &r->sets[i];
		if (c.q->packed) {
			continue; /* the front reads JSON only */
		}
		if (bq_load_each(r->port[s], &c.q->b, all, c.q->check,
				 on_redis_answer, &c) != KVI_OK) {
			c.bad++;
		}
	}
	kvi_free(all);
	printf("check: %s against kvindex: answers=%zu listener_matches=%zu "
	       "mismatches=%zu\n",
	       c.server, c.compared, c.pairs, c.bad);
	if (c.pairs == 0) {
		fprintf(stderr,
			"check: no listener matched: nothing compared\n");
	}
	return c.bad == 0 && c.pairs > 0;
}

/* ---- the measurement ----------------------------------------------------- */

typedef struct phase_cpu {
	const run *r;
	bq_server s;
	uint64_t t0[BQ_MAX_PIDS];
} phase_cpu;

static void
on_timed(void *arg)
{
	phase_cpu *p = arg;
	for (int i = 0; i < p->r->n_pids[p->s]; i++) {
		p->t0[i] = bq_cpu_ns(p->r->pids[p->s][i]);
	}
}

/* cpu_per_query writes the CPU time per query each process of s used
 * since on_timed, and their sum. */
static void
cpu_per_query(const phase_cpu *pc, size_t done, bq_row *row)
{
	bq_server s = pc->s;
	row->n_parts[s] = pc->r->n_pids[s];
	row->cpu_us[s] = 0;
	for (int i = 0; i < row->n_parts[s] && done > 0; i++) {
		uint64_t ns = bq_cpu_ns(pc->r->pids[s][i]) - pc->t0[i];
		row->cpu_part_us[s][i] = (double)ns / 1e3 / (double)done;
		row->cpu_us[s] += row->cpu_part_us[s][i];
	}
}

/* phase runs server s on set q with row->conns connections into row;
 * returns false when the server cannot be reached. */
static bool
phase(const run *r, const query_set *q, bq_row *row, bq_server s)
{
	phase_cpu pc = {.r = r, .s = s};
	bq_load_result *x = &row->r[s];
	if (bq_load_run(r->port[s], &q->b, row->conns, r->o.seconds, on_timed,
			&pc, x) != KVI_OK) {
		fprintf(stderr, "%s: connection refused\n", bq_server_name(s));
		return false;
	}
	row->ran[s] = true;
	cpu_per_query(&pc, x->done, row);
	fprintf(stderr, "%s %s %s conns=%d %s: %.0f q/s p50 %.0f us", q->b.kind,
		q->b.form, q->b.body_form, row->conns, bq_server_name(s),
		x->qps, x->p50_us);
	if (x->errors > 0) {
		fprintf(stderr, " errors=%zu (first: %s %d)", x->errors,
			x->first_error < 0 ? "closed" : "status",
			x->first_error);
	}
	fprintf(stderr, "\n");
	return true;
}

/* measure runs one phase per measured set, number of connections and
 * server (kvindex and the floor alone for packed sets) into rows, and
 * writes the number of rows to *n; returns the number of failed
 * requests. */
static size_t
measure(run *r, bq_row *rows, size_t *n)
{
	size_t errors = 0;
	*n = 0;
	for (size_t i = 0; i < r->n_sets; i++) {
		const query_set *q = &r->sets[i];
		for (int c = 0; c < r->o.n_conns && q->measured; c++) {
			bq_row *row = &rows[(*n)++];
			*row = (bq_row){.kind = q->b.kind,
					.form = q->b.form,
					.body = q->b.body_form,
					.body_bytes = q->body_bytes,
					.conns = r->o.conns[c]};
			for (int s = 0; s < BQ_SERVERS; s++) {
				if (r->port[s] <= 0 ||
				    (q->packed &&
				     (s == BQ_REDIS || s == BQ_REDIS_AOF))) {
					continue;
				}
				if (!phase(r, q, row, s)) {
					return errors + 1;
				}
				errors += row->r[s].errors;
			}
		}
	}
	return errors;
}

/* ---- main ------------------------------------------------------------------
 */

static bool
make_out_dir(run *r)
{
	if (r->o.out != NULL) {
		if (mkdir(r->o.out, 0755) != 0 && access(r->o.out, W_OK) != 0) {
			fprintf(stderr, "cannot use --out %s\n", r->o.out);
			return false;
		}
		r->out = kvi_strdup(r->o.out);
		return true;
	}
	const char *tmp = getenv("TMPDIR");
	char *tmpl = kvt_path(tmp != NULL && tmp[0] ? tmp : "/tmp",
			      "bench_query-XXXXXX");
	if (mkdtemp(tmpl) == NULL) {
		kvi_free(tmpl);
		return false;
	}
	r->out = tmpl;
	return true;
}

/* stop_all stops every process of the run; returns false when one of
 * this program's servers did not exit cleanly. */
static bool
stop_all(run *r)
{
	kvt_proc *servers[] = {r->floor, r->front[0], r->front[1]};
	static const char *const names[] = {"floor", "front", "front-aof"};
	bool clean = true;
	for (size_t i = 0; i < sizeof(servers) / sizeof(*servers); i++) {
		int status = 0;
		if (servers[i] == NULL) {
			continue;
		}
		kvt_proc_stop(servers[i], 10000, &status);
		kvt_proc_free(servers[i]);
		if (status != 0) {
			fprintf(stderr, "%s exited with status %d: see %s\n",
				names[i], status, r->dir);
			clean = false;
		}
	}
	bq_redis_stop(&r->redis[0]);
	bq_redis_stop(&r->redis[1]);
	bq_cluster_stop(&r->cluster);
	return clean;
}

static bool
start_kvindex(run *r)
{
	bq_cluster_config cc = {.pods = r->o.pods,
				.entries = r->o.entries,
				.http_threads = r->o.http_threads,
				.ipc = r->o.ipc,
				.trace = TRACE,
				.block_size = BS,
				.blocks_per_id = BPI,
				.fill_timeout_s = 600};
	if (bq_cluster_start(&cc, r->dir, &r->cluster) != KVI_OK) {
		fprintf(stderr, "kvindex did not start or fill: see %s\n",
			r->dir);
		return false;
	}
	r->port[BQ_KVINDEX] = r->cluster.port;
	bq_cluster_pids(&r->cluster, r->pids[BQ_KVINDEX]);
	r->n_pids[BQ_KVINDEX] = 3;
	printf("kvindex: listeners=%d entries=%.0f fill_seconds=%.1f "
	       "http_threads=%d shards=%s\n",
	       r->cluster.sim.n, r->cluster.entries, r->cluster.fill_seconds,
	       r->o.http_threads, r->o.ipc ? "ipc" : "tcp");
	return true;
}

static void
print_sets(const run *r)
{
	for (size_t i = 0; i < r->n_sets; i++) {
		const query_set *q = &r->sets[i];
		size_t blocks = 0, answer = 0;
		for (size_t j = 0; j < q->b.n; j++) {
			blocks += q->b.blocks[j];
			answer += q->answer_len[j];
		}
		printf("queries: %s/%s/%s bodies=%zu mean_blocks=%.0f "
		       "mean_body_bytes=%.0f mean_answer_bytes=%.0f%s\n",
		       q->b.kind, q->b.form, q->b.body_form, q->b.n,
		       (double)blocks / (double)q->b.n, q->body_bytes,
		       (double)answer / (double)q->b.n,
		       q->measured ? "" : " (checked, not measured)");
	}
}

/* bench runs everything after the options; returns the exit code. */
static int
bench(run *r)
{
	char *lengths = kvt_path(r->dir, "answer-lengths.txt");
	bool ok = start_kvindex(r);
	if (ok) {
		build_sets(r);
		ok = collect_answers(r, lengths);
	}
	if (ok) {
		print_sets(r);
		ok = check_packed(r) && start_floor(r, lengths);
	}
	if (ok && r->o.redis && !r->o.body[BQ_JSON]) {
		printf("redis: not started: it takes JSON bodies only\n");
	} else if (ok && r->o.redis) {
		ok = start_redis_side(r) && check_redis(r, BQ_REDIS) &&
		     check_redis(r, BQ_REDIS_AOF);
	}
	fflush(stdout);
	size_t errors = 0;
	if (ok) {
		bq_row *rows = kvi_calloc(r->n_sets * (size_t)r->o.n_conns + 1,
					  sizeof(*rows));
		size_t n;
		errors = measure(r, rows, &n);
		printf("\n");
		bq_report_table(stdout, rows, n);
		printf("\n");
		ok = bq_report_write(r->out, rows, n);
		kvi_free(rows);
	}
	if (errors > 0) {
		fprintf(stderr, "%zu requests failed\n", errors);
	}
	ok = stop_all(r) && ok;
	sets_free(r);
	kvi_free(lengths);
	return ok && errors == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--serve-floor") == 0) {
		return bq_floor_main(argv[2], argv[3], atoi(argv[4]));
	}
	if (argc == 7 && strcmp(argv[1], "--serve-redis-front") == 0) {
		return bq_front_main(argv[2], atoi(argv[3]),
				     (uint32_t)atoi(argv[4]), argv[5],
				     atoi(argv[6]));
	}
	run r = {0};
	bq_options_parse(argc, argv, &r.o);
	if (!make_out_dir(&r) ||
	    kvt_tmpdir_make("kvi-bench-query", &r.dir) != KVI_OK) {
		fprintf(stderr, "cannot make the run's directories\n");
		return 1;
	}
	printf("out: %s\n", r.out);
	fflush(stdout);
	int rc = bench(&r);
	const char *keep = getenv("KVI_TEST_KEEP");
	if (rc != 0 && (keep == NULL || strcmp(keep, "1") != 0)) {
		fprintf(stderr, "KVI_TEST_KEEP=1 keeps the run's logs\n");
	}
	kvt_tmpdir_remove(r.dir);
	kvi_free(r.dir);
	kvi_free(r.out);
	return rc;
}
