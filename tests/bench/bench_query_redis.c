/*
 * bench_query_redis.c - the Redis-backed index's layout, contents and
 * server (bench_query_redis.h).
 */
#include "bench_query_redis.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"

#define PIPELINE      10000
#define START_WAIT_MS 10000

/* ---- holders -------------------------------------------------------- */

static uint64_t
field_hash(const char *s, size_t len)
{
	return XXH3_64bits(s, len);
}

static void
holders_index(bq_holders *hs)
{
	size_t size = 16;
	while (size < hs->n * 2) {
		size *= 2;
	}
	hs->mask = size - 1;
	hs->table = kvi_calloc(size, sizeof(*hs->table));
	for (size_t i = 0; i < hs->n; i++) {
		size_t s =
		    field_hash(hs->h[i].field, hs->h[i].field_len) & hs->mask;
		while (hs->table[s] != 0) {
			s = (s + 1) & hs->mask;
		}
		hs->table[s] = (uint32_t)i + 1;
	}
}

/* holders_add appends the dp ranks of pod name; the instance id is the
 * coordinator's for a pod of its discovery file (coordinator/registry/pod.c).
 */
static void
holders_add(bq_holders *hs, const char *name, int dp)
{
	uint64_t iid = XXH3_64bits(name, strlen(name)) >> 11;
	hs->h = kvi_reallocarray(hs->h, hs->n + (size_t)dp, sizeof(*hs->h));
	for (int r = 0; r < dp; r++) {
		bq_holder *h = &hs->h[hs->n++];
		h->instance_id = iid;
		h->rank = (uint16_t)r;
		h->pod = kvi_strdup(name);
		h->field_len = (size_t)snprintf(h->field, sizeof(h->field),
						"%" PRIu64 "#%d", iid, r);
	}
}

kvi_err
bq_holders_load(const char *layout_path, bq_holders *out)
{
	char *text = kvt_file_read(layout_path, NULL);
	if (text == NULL) {
		return KVI_ENOENT;
	}
	json_t *layout = json_loads(text, 0, NULL);
	kvi_free(text);
	json_t *pods = json_object_get(layout, "pods");
	bq_holders hs = {0};
	size_t i;
	json_t *pod;
	json_array_foreach(pods, i, pod)
	{
		const char *name =
		    json_string_value(json_object_get(pod, "name"));
		json_int_t dp =
		    json_integer_value(json_object_get(pod, "dp_size"));
		if (name == NULL || dp < 1 || dp > 65536) {
			json_decref(layout);
			bq_holders_fini(&hs);
			return KVI_EPROTO;
		}
		holders_add(&hs, name, (int)dp);
	}
	json_decref(layout);
	if (hs.n == 0) {
		return KVI_EPROTO;
	}
	holders_index(&hs);
	*out = hs;
	return KVI_OK;
}

void
bq_holders_fini(bq_holders *hs)
{
	for (size_t i = 0; i < hs->n; i++) {
		kvi_free(hs->h[i].pod);
	}
	kvi_free(hs->h);
	kvi_free(hs->table);
	*hs = (bq_holders){0};
}

long
bq_holders_find(const bq_holders *hs, const char *s, size_t len)
{
	size_t slot = field_hash(s, len) & hs->mask;
	for (uint32_t v; (v = hs->table[slot]) != 0;
	     slot = (slot + 1) & hs->mask) {
		const bq_holder *h = &hs->h[v - 1];
		if (h->field_len == len && memcmp(h->field, s, len) == 0) {
			return (long)v - 1;
		}
	}
	return -1;
}

size_t
bq_u64_text(char buf[24], uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (size_t i = 0; i < n; i++) {
		buf[i] = tmp[n - 1 - i];
	}
	return n;
}

size_t
bq_block_key(char *buf, size_t cap, const char *model, size_t model_len,
	     uint64_t seq_hash)
{
	char digits[24];
	size_t nd = bq_u64_text(digits, seq_hash);
	if (model_len + 1 + nd + 1 > cap) {
		return 0;
	}
	memcpy(buf, model, model_len);
	buf[model_len] = '@';
	memcpy(buf + model_len + 1, digits, nd);
	buf[model_len + 1 + nd] = '\0';
	return model_len + 1 + nd;
}

/* ---- the ground truth ------------------------------------------------ */

static uint8_t
tiers_of(const json_t *tiers)
{
	uint8_t t = 0;
	size_t i;
	json_t *v;
	json_array_foreach(tiers, i, v)
	{
		const char *s = json_string_value(v);
		t |= s && strcmp(s, "gpu") == 0 ? BQ_TIER_GPU : 0;
		t |= s && strcmp(s, "cpu") == 0 ? BQ_TIER_CPU : 0;
	}
	return t;
}

static kvi_err
truth_add(bq_truth *t, const json_t *blocks, uint32_t holder)
{
	size_t i;
	json_t *b;
	json_array_foreach(blocks, i, b)
	{
		uint64_t seq;
		if (!kvt_json_u64(json_object_get(b, "seq_hash"), &seq)) {
			return KVI_EPROTO;
		}
		if (t->n == t->cap) {
			t->cap = t->cap ? t->cap * 2 : 65536;
			t->e = kvi_reallocarray(t->e, t->cap, sizeof(*t->e));
		}
		t->e[t->n++] = (bq_entry){
		    .seq_hash = seq,
		    .holder = holder,
		    .tiers = tiers_of(json_object_get(b, "tiers")),
		};
	}
	return KVI_OK;
}

kvi_err
bq_truth_read(const kvt_sim *sim, bq_truth *out)
{
	bq_truth t = {0};
	kvi_err rc = KVI_OK;
	for (int i = 0; i < sim->n && rc == KVI_OK; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/truth?pod=%d&rank=%d",
			 i / sim->dp, i % sim->dp);
		kvt_http_resp r;
		rc = kvt_sim_call(sim, "GET", path, NULL, &r);
		json_t *blocks = json_object_get(r.json, "blocks");
		if (rc == KVI_OK &&
		    (r.status != 200 || !json_is_array(blocks))) {
			rc = KVI_EPROTO;
		}
		if (rc == KVI_OK) {
			rc = truth_add(&t, blocks, (uint32_t)i);
		}
		kvt_http_resp_fini(&r);
	}
	if (rc != KVI_OK) {
		bq_truth_fini(&t);
		return rc;
	}
	*out = t;
	return KVI_OK;
}

void
bq_truth_fini(bq_truth *t)
{
	kvi_free(t->e);
	*t = (bq_truth){0};
}

/* ---- redis-server ---------------------------------------------------- */

static redisContext *
connect_redis(int port)
{
	struct timeval tv = {.tv_sec = 5};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	if (c != NULL && c->err) {
		redisFree(c);
		return NULL;
	}
	return c;
}

static bool
pings(int port)
{
	redisContext *c = connect_redis(port);
	redisReply *r = c ? redisCommand(c, "PING") : NULL;
	bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
	if (r != NULL) {
		freeReplyObject(r);
	}
	if (c != NULL) {
		redisFree(c);
	}
	return ok;
}

kvi_err
bq_redis_start(const char *bin, const char *dir, bool aof, bq_redis *r)
{
	*r = (bq_redis){.aof = aof};
	char *data = kvt_path(dir, aof ? "redis-aof" : "redis");
	char *log = kvt_path(dir, aof ? "redis-aof.log" : "redis.log");
	mkdir(data, 0700);
	char port[16];
	kvi_err rc = kvt_ports_pick(1, &r->port);
	snprintf(port, sizeof(port), "%d", r->port);
	const char *argv[] = {bin,
			      "--port",
			      port,
			      "--bind",
			      "127.0.0.1",
			      "--save",
			      "",
			      "--appendonly",
			      aof ? "yes" : "no",
			      "--appendfsync",
			      "everysec",
			      "--dir",
			      data,
			      "--daemonize",
			      "no",
			      NULL};
	if (rc == KVI_OK) {
		rc = kvt_proc_start(argv, log, &r->proc);
	}
	int64_t deadline = kvt_now_ms() + START_WAIT_MS;
	while (rc == KVI_OK && !pings(r->port)) {
		if (!kvt_proc_alive(r->proc)) {
			rc = KVI_EIO;
		} else if (kvt_now_ms() > deadline) {
			rc = KVI_ETIMEDOUT;
		} else {
			kvt_sleep_ms(20);
		}
	}
	if (rc != KVI_OK) {
		fprintf(stderr, "redis-server did not start: see %s\n", log);
		bq_redis_stop(r);
	}
	kvi_free(data);
	kvi_free(log);
	return rc;
}

void
bq_redis_stop(bq_redis *r)
{
	if (r->proc != NULL) {
		kvt_proc_stop(r->proc, 10000, NULL);
		kvt_proc_free(r->proc);
		r->proc = NULL;
	}
}

/* hset queues one HSET per tier of e; returns how many. */
static size_t
hset(redisContext *c, const bq_entry *e, const bq_holder *h, const char *model)
{
	static const char *const tiers[] = {"gpu", "cpu"};
	char key[160], field[48];
	size_t klen =
	    bq_block_key(key, sizeof(key), model, strlen(model), e->seq_hash);
	size_t n = 0;
	for (unsigned t = 0; t < 2; t++) {
		if (!(e->tiers & (1u << t))) {
			continue;
		}
		int flen =
		    snprintf(field, sizeof(field), "%s@%s", h->field, tiers[t]);
		redisAppendCommand(c, "HSET %b %b %s", key, klen, field,
				   (size_t)flen, "");
		n++;
	}
	return n;
}

/* drain reads n replies; returns false at the first error. */
static bool
drain(redisContext *c, size_t n)
{
	bool ok = true;
	for (size_t i = 0; i < n; i++) {
		redisReply *r;
		if (redisGetReply(c, (void **)&r) != REDIS_OK) {
			return false;
		}
		ok = ok && r->type != REDIS_REPLY_ERROR;
		freeReplyObject(r);
	}
	return ok;
}

kvi_err
bq_redis_ingest(const bq_redis *r, const bq_truth *t, const bq_holders *hs,
		const char *model, double *seconds)
{
	redisContext *c = connect_redis(r->port);
	if (c == NULL) {
		return KVI_EIO;
	}
	int64_t t0 = kvt_now_ms();
	bool ok = true;
	size_t queued = 0;
	for (size_t i = 0; i < t->n && ok; i++) {
		queued += hset(c, &t->e[i], &hs->h[t->e[i].holder], model);
		if (queued >= PIPELINE) {
			ok = drain(c, queued);
			queued = 0;
		}
	}
	ok = ok && drain(c, queued);
	*seconds = (double)(kvt_now_ms() - t0) / 1e3;
	redisFree(c);
	return ok ? KVI_OK : KVI_EIO;
}
