/*
 * bench_query_check.c - comparing kvindex's and the Redis index's answers
 * (bench_query_check.h).
 */
#include "bench_query_check.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kvt_http.h"

typedef struct listener_match {
	char key[48]; /* "<instance_id>#<dp_rank>" */
	uint64_t blocks;
} listener_match;

/* workers reads the workers of an answer into a new array (kvi_free) of
 * *n entries; NULL when the answer has none in the expected shape. */
static listener_match *
workers(const char *text, size_t len, size_t *n)
{
	json_t *answer = kvt_json_loads(text, len);
	json_t *w = json_object_get(answer, "workers");
	if (!json_is_array(w)) {
		json_decref(answer);
		return NULL;
	}
	*n = json_array_size(w);
	listener_match *m = kvi_calloc(*n + 1, sizeof(*m));
	for (size_t i = 0; i < *n; i++) {
		json_t *o = json_array_get(w, i);
		const char *iid =
		    json_string_value(json_object_get(o, "instance_id"));
		uint64_t rank = 0;
		kvt_json_u64(json_object_get(o, "dp_rank"), &rank);
		kvt_json_u64(json_object_get(o, "matched_blocks"),
			     &m[i].blocks);
		snprintf(m[i].key, sizeof(m[i].key), "%s#%llu", iid ? iid : "?",
			 (unsigned long long)rank);
	}
	json_decref(answer);
	return m;
}

static const listener_match *
find(const listener_match *m, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(m[i].key, key) == 0) {
			return &m[i];
		}
	}
	return NULL;
}

static int
by_blocks_desc(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return (a < b) - (a > b);
}

/* same_best says whether the best n matched_blocks of k and r are equal
 * as multisets. */
static bool
same_best(const listener_match *k, size_t nk, const listener_match *r, size_t n)
{
	uint64_t *a = kvi_calloc(nk + 1, sizeof(uint64_t));
	uint64_t *b = kvi_calloc(n + 1, sizeof(uint64_t));
	for (size_t i = 0; i < nk; i++) {
		a[i] = k[i].blocks;
	}
	for (size_t i = 0; i < n; i++) {
		b[i] = r[i].blocks;
	}
	qsort(a, nk, sizeof(uint64_t), by_blocks_desc);
	qsort(b, n, sizeof(uint64_t), by_blocks_desc);
	bool same = memcmp(a, b, n * sizeof(uint64_t)) == 0;
	kvi_free(a);
	kvi_free(b);
	return same;
}

/* tied_at_cut says whether a listener with blocks matched blocks may be
 * missing from kvindex's top_k answer k: only when that answer was cut at
 * top_k and its last listener matched as many (a tie broken otherwise). */
static bool
tied_at_cut(const listener_match *k, size_t nk, uint32_t top_k, uint64_t blocks)
{
	if (top_k == 0 || nk != top_k) {
		return false;
	}
	uint64_t least = k[0].blocks;
	for (size_t i = 1; i < nk; i++) {
		least = k[i].blocks < least ? k[i].blocks : least;
	}
	return blocks == least;
}

static bool
compare(const listener_match *k, size_t nk, const listener_match *r, size_t nr,
	uint32_t top_k, size_t *pairs, char *why, size_t cap)
{
	size_t want = top_k > 0 && nk > top_k ? top_k : nk;
	if (nr != want) {
		snprintf(why, cap, "kvindex names %zu listeners, redis %zu",
			 want, nr);
		return false;
	}
	for (size_t i = 0; i < nr; i++) {
		const listener_match *km = find(k, nk, r[i].key);
		if (km == NULL && !tied_at_cut(k, nk, top_k, r[i].blocks)) {
			snprintf(why, cap, "listener %s only in redis's answer",
				 r[i].key);
			return false;
		}
		if (km != NULL && km->blocks != r[i].blocks) {
			snprintf(why, cap,
				 "listener %s: kvindex %llu blocks, redis %llu",
				 r[i].key, (unsigned long long)km->blocks,
				 (unsigned long long)r[i].blocks);
			return false;
		}
		*pairs += km != NULL;
	}
	if (!same_best(k, nk, r, nr)) {
		snprintf(why, cap, "the best %zu matches differ", nr);
		return false;
	}
	return true;
}

bool
bq_check_answer(const char *kvi, size_t kvi_len, const char *red,
		size_t red_len, uint32_t top_k, size_t *pairs, char *why,
		size_t cap)
{
	size_t nk = 0, nr = 0;
	listener_match *k = workers(kvi, kvi_len, &nk);
	listener_match *r = workers(red, red_len, &nr);
	bool ok = k != NULL && r != NULL;
	if (!ok) {
		snprintf(why, cap, "%s answer has no workers list",
			 k == NULL ? "kvindex's" : "redis's");
	} else {
		ok = compare(k, nk, r, nr, top_k, pairs, why, cap);
	}
	kvi_free(k);
	kvi_free(r);
	return ok;
}
