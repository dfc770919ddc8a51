/*
 * bench_query_front.c - the HTTP floor and the Redis front
 * (bench_query_front.h).
 */
#include "bench_query_front.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "alloc.h"
#include "api_query.h"
#include "bench_query_proc.h"
#include "bench_query_redis.h"
#include "hash.h"
#include "httpd.h"
#include "qanswer.h"

/* ---- the floor ------------------------------------------------------- */

typedef struct floor_srv {
	size_t *len; /* answer length per X-Bench-Req */
	size_t n;
	char *canned; /* {"pad":"xxx…"} as long as the longest answer */
	size_t max;
} floor_srv;

static void
floor_on_query(void *arg, kvi_http_req *req)
{
	floor_srv *f = arg;
	const char *id = kvi_http_req_header(req, "X-Bench-Req");
	unsigned long i = id != NULL ? strtoul(id, NULL, 10) : f->n;
	if (i >= f->n) {
		kvi_http_reply_error(req, 400, "no such X-Bench-Req");
		return;
	}
	size_t len = f->len[i];
	char *body = kvi_malloc(len + 1);
	memcpy(body, f->canned, len);
	if (len >= 10) {
		memcpy(body + len - 2, "\"}", 2);
	}
	kvi_http_reply_take(req, 200, "application/json", body, len);
}

static bool
floor_load(floor_srv *f, const char *path)
{
	FILE *in = fopen(path, "r");
	if (in == NULL) {
		return false;
	}
	size_t cap = 0, v;
	while (fscanf(in, "%zu", &v) == 1) {
		if (f->n == cap) {
			cap = cap ? cap * 2 : 1024;
			f->len = kvi_reallocarray(f->len, cap, sizeof(size_t));
		}
		f->len[f->n++] = v;
		f->max = v > f->max ? v : f->max;
	}
	fclose(in);
	f->canned = kvi_malloc(f->max + 16);
	memset(f->canned, 'x', f->max + 16);
	memcpy(f->canned, "{\"pad\":\"", 8);
	return f->n > 0;
}

int
bq_floor_main(const char *lengths_path, const char *port_file, int threads)
{
	floor_srv f = {0};
	if (!floor_load(&f, lengths_path)) {
		fprintf(stderr, "floor: cannot read %s\n", lengths_path);
		return 1;
	}
	kvi_httpd *h = kvi_httpd_alloc(NULL);
	kvi_httpd_route(h, "POST", "/query", floor_on_query, &f);
	int rc = bq_serve(h, threads, port_file);
	kvi_free(f.len);
	kvi_free(f.canned);
	return rc;
}

/* ---- the Redis front -------------------------------------------------- */

/* What a loop thread keeps between its requests. */
typedef struct front_thread {
	redisContext *redis;
	uint32_t *longest, *gpu, *cpu; /* per holder, for one query */
	kvc_qanswer_match *matches;
	char *cmd; /* the commands of one query */
	size_t cmd_cap;
} front_thread;

typedef struct front {
	bq_holders hs;
	int redis_port;
	uint32_t block_size;
	uint64_t seed; /* the local-hash seed: no LoRA, no salt */
	pthread_mutex_t mu;
	front_thread *threads[KVI_HTTPD_MAX_THREADS]; /* freed at the end */
	int n_threads;
} front;

static _Thread_local front_thread *tl;

/* credit gives block i to holder h on tier[0..len) (its fields list one
 * tier each) if h holds blocks 0..i-1 on some tier; returns whether it
 * did. */
static bool
credit(front_thread *t, long h, const char *tier, size_t len, uint32_t i)
{
	if (t->longest[h] < i) {
		return false;
	}
	t->longest[h] = i + 1;
	if (len == 3 && memcmp(tier, "gpu", 3) == 0 && t->gpu[h] == i) {
		t->gpu[h] = i + 1;
	}
	if (len == 3 && memcmp(tier, "cpu", 3) == 0 && t->cpu[h] == i) {
		t->cpu[h] = i + 1;
	}
	return true;
}

/*
 * Reading the replies. hiredis builds a reply object per element (two
 * allocations each), which cost the front more CPU than Redis spends
 * answering: a query whose prefix every listener holds reads thousands of
 * fields. The front gives hiredis's reader functions of its own instead,
 * which credit each field as it is parsed and allocate nothing; every
 * reply they "create" is the same token, never freed.
 */
typedef struct scan {
	const front *f;
	front_thread *t;
	uint32_t replies; /* replies begun: block replies - 1 is being read */
	bool advanced;    /* a listener took the block being parsed */
	bool open;        /* some listener took every block so far */
	bool error;       /* an unexpected reply (an error, not an array) */
} scan;

static char reply_token;

#if HIREDIS_MAJOR >= 1
typedef size_t array_len;
#else
typedef int array_len;
#endif

static void *
scan_array(const redisReadTask *task, array_len n)
{
	scan *s = task->privdata;
	(void)n;
	if (task->parent != NULL) {
		s->error = true;
		return &reply_token;
	}
	s->open = s->open && (s->replies == 0 || s->advanced);
	s->replies++;
	s->advanced = false;
	return &reply_token;
}

static void *
scan_string(const redisReadTask *task, char *str, size_t len)
{
	scan *s = task->privdata;
	if (task->parent == NULL || task->type != REDIS_REPLY_STRING) {
		s->error = true;
		return &reply_token;
	}
	const char *at = s->open ? memchr(str, '@', len) : NULL;
	long h = at != NULL
		     ? bq_holders_find(&s->f->hs, str, (size_t)(at - str))
		     : -1;
	if (h >= 0 && credit(s->t, h, at + 1, len - (size_t)(at + 1 - str),
			     s->replies - 1)) {
		s->advanced = true;
	}
	return &reply_token;
}

static void *
scan_integer(const redisReadTask *task, long long v)
{
	(void)v;
	((scan *)task->privdata)->error = true;
	return &reply_token;
}

static void *
scan_nil(const redisReadTask *task)
{
	((scan *)task->privdata)->error = true;
	return &reply_token;
}

static void
scan_free(void *reply)
{
	(void)reply;
}

static redisReplyObjectFunctions scan_functions = {
    .createString = scan_string,
    .createArray = scan_array,
    .createInteger = scan_integer,
    .createNil = scan_nil,
    .freeObject = scan_free,
};

/* thread_alloc makes this loop thread's state and records it in f. */
static front_thread *
thread_alloc(front *f)
{
	front_thread *t = kvi_calloc(1, sizeof(*t));
	t->longest = kvi_calloc(f->hs.n, sizeof(uint32_t));
	t->gpu = kvi_calloc(f->hs.n, sizeof(uint32_t));
	t->cpu = kvi_calloc(f->hs.n, sizeof(uint32_t));
	t->matches = kvi_calloc(f->hs.n, sizeof(kvc_qanswer_match));
	pthread_mutex_lock(&f->mu);
	f->threads[f->n_threads++] = t;
	pthread_mutex_unlock(&f->mu);
	return t;
}

static void
thread_free(front_thread *t)
{
	if (t->redis != NULL) {
		redisFree(t->redis);
	}
	kvi_free(t->longest);
	kvi_free(t->gpu);
	kvi_free(t->cpu);
	kvi_free(t->matches);
	kvi_free(t->cmd);
	kvi_free(t);
}

/* thread_state returns this loop thread's state, connecting to Redis if
 * it has no connection; NULL when Redis cannot be reached. */
static front_thread *
thread_state(front *f)
{
	if (tl == NULL) {
		tl = thread_alloc(f);
	}
	if (tl->redis == NULL) {
		struct timeval tv = {.tv_sec = 5};
		tl->redis =
		    redisConnectWithTimeout("127.0.0.1", f->redis_port, tv);
		if (tl->redis != NULL && tl->redis->err) {
			redisFree(tl->redis);
			tl->redis = NULL;
		} else if (tl->redis != NULL) {
			tl->redis->reader->fn = &scan_functions;
		}
	}
	return tl->redis != NULL ? tl : NULL;
}

#define HKEYS_HEAD "*2\r\n$5\r\nHKEYS\r\n$"

/* append_hkeys queues one HKEYS per block of seq[0..nb), written in
 * Redis's protocol into one buffer and handed to hiredis at once (its
 * printf-like formatting costs more per command than Redis does). */
static void
append_hkeys(front_thread *t, const char *model, const uint64_t *seq, size_t nb)
{
	size_t model_len = strlen(model);
	size_t need = nb * (model_len + 64) + 1;
	if (t->cmd_cap < need) {
		t->cmd_cap = need;
		t->cmd = kvi_realloc(t->cmd, need);
	}
	size_t len = 0;
	for (size_t i = 0; i < nb; i++) {
		char key[160], digits[24];
		size_t klen =
		    bq_block_key(key, sizeof(key), model, model_len, seq[i]);
		size_t nd = bq_u64_text(digits, klen);
		memcpy(t->cmd + len, HKEYS_HEAD, sizeof(HKEYS_HEAD) - 1);
		len += sizeof(HKEYS_HEAD) - 1;
		memcpy(t->cmd + len, digits, nd);
		len += nd;
		memcpy(t->cmd + len, "\r\n", 2);
		memcpy(t->cmd + len + 2, key, klen);
		memcpy(t->cmd + len + 2 + klen, "\r\n", 2);
		len += klen + 4;
	}
	redisAppendFormattedCommand(t->redis, t->cmd, len);
}

/* lookup pipelines one HKEYS per block of seq[0..nb) and fills the
 * thread's per-holder matches; returns false when Redis failed. */
static bool
lookup(const front *f, front_thread *t, const char *model, const uint64_t *seq,
       size_t nb)
{
	memset(t->longest, 0, f->hs.n * sizeof(uint32_t));
	memset(t->gpu, 0, f->hs.n * sizeof(uint32_t));
	memset(t->cpu, 0, f->hs.n * sizeof(uint32_t));
	append_hkeys(t, model, seq, nb);
	scan s = {.f = f, .t = t, .open = true};
	t->redis->reader->privdata = &s;
	for (size_t i = 0; i < nb; i++) {
		void *reply;
		if (redisGetReply(t->redis, &reply) != REDIS_OK) {
			return false;
		}
	}
	t->redis->reader->privdata = NULL;
	return !s.error && s.replies == nb;
}

static size_t
collect(const front *f, front_thread *t)
{
	size_t n = 0;
	for (size_t h = 0; h < f->hs.n; h++) {
		if (t->longest[h] == 0) {
			continue;
		}
		const bq_holder *hd = &f->hs.h[h];
		t->matches[n++] = (kvc_qanswer_match){
		    .instance_id = hd->instance_id,
		    .dp_rank = hd->rank,
		    .pod = hd->pod,
		    .longest = t->longest[h],
		    .gpu = t->gpu[h],
		    .cpu = t->cpu[h],
		    .disk = t->longest[h] - t->gpu[h] - t->cpu[h],
		};
	}
	return n;
}

static void
front_on_query(void *arg, kvi_http_req *req)
{
	front *f = arg;
	size_t len;
	const char *body = kvi_http_req_body(req, &len);
	/* kvindex's own parser and answer writer: both indexes pay the
	 * same for the JSON, and answer in the same words */
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	if (kvc_api_query_parse(body, len, (size_t)1 << 20, &q, &e) != KVI_OK) {
		kvi_http_reply_error(req, e.status, "bad query: %s", e.message);
		kvc_qerr_fini(&e);
		return;
	}
	front_thread *t = thread_state(f);
	size_t nb = q.n_tokens / f->block_size;
	uint64_t *seq = kvi_reallocarray(NULL, nb + 1, sizeof(uint64_t));
	kvi_local_hashes(q.token_ids, q.n_tokens, f->block_size, f->seed, seq);
	kvi_seq_hashes(KVI_SEQ_ROOT, seq, nb, seq);
	if (t == NULL || !lookup(f, t, q.model, seq, nb)) {
		if (t != NULL) {
			redisFree(t->redis);
			t->redis = NULL;
		}
		kvi_http_reply_error(req, 503, "redis failed");
	} else {
		kvc_qanswer_result r = {.model = q.model,
					.block_size = f->block_size,
					.query_blocks = nb,
					.matches = t->matches,
					.n_matches = collect(f, t),
					.top_k = q.top_k,
					.shards_answered = 2,
					.shards_total = 2};
		size_t alen;
		char *text = kvc_qanswer_text(&r, &alen);
		kvi_http_reply_take(req, 200, "application/json", text, alen);
	}
	kvi_free(seq);
	kvc_qreq_fini(&q);
}

int
bq_front_main(const char *layout_path, int redis_port, uint32_t block_size,
	      const char *port_file, int threads)
{
	front f = {.redis_port = redis_port,
		   .block_size = block_size,
		   .seed = kvi_local_seed(NULL, 0, NULL, 0),
		   .mu = PTHREAD_MUTEX_INITIALIZER};
	if (bq_holders_load(layout_path, &f.hs) != KVI_OK) {
		fprintf(stderr, "front: cannot read %s\n", layout_path);
		return 1;
	}
	kvi_httpd *h = kvi_httpd_alloc(NULL);
	kvi_httpd_route(h, "POST", "/query", front_on_query, &f);
	int rc = bq_serve(h, threads, port_file);
	for (int i = 0; i < f.n_threads; i++) {
		thread_free(f.threads[i]);
	}
	bq_holders_fini(&f.hs);
	return rc;
}
