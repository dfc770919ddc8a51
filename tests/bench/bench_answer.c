/*
 * bench_answer - the coordinator's /query answer writer alone
 * (kvc_qanswer_text), on synthetic matches: n listeners of
 * n/2 DP=2 pods, random instance ids, matches of 5..7 blocks, so that
 * ties and grouping by instance are exercised as a shared system prompt
 * does.
 *
 *   bench_answer LISTENERS [TOP_K [ROUNDS]]
 *
 * prints the answer's size and the mean time per answer, then the cost of
 * the other end of a query at the coordinator: parsing a /query body of
 * 16,000 token ids (1,000 blocks; ids of 6 digits, ", " between them, as
 * common JSON encoders write) and hashing it into sequence hashes, and
 * parsing a /query_by_hash body of 1,000 block hashes (random u64s, half
 * of them beyond int64); the token array read alone by each reader this
 * processor runs (api_tokens.h's levels); and the same 16,000 ids as a
 * packed body (api_packed.h), copied into the request. The time moves with the
 * machine; for a figure that does not, count instructions: valgrind
 * --tool=callgrind bench_answer 1000 0 10   (and 30; subtract)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "api_packed.h"
#include "api_query.h"
#include "api_tokens.h"
#include "hash.h"
#include "qanswer.h"

static double
now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* bench_levels times the token array of body alone, at each level. */
static void
bench_levels(const char *body, size_t blen, size_t tokens, int rounds)
{
	static const char *const names[KVC_TOKENS_LEVELS] = {
	    "portable", "sse2", "avx2", "avx512", "avx512_vbmi"};
	const char *p = strchr(body, '[') + 1, *end = body + blen;
	for (int l = 0; l < KVC_TOKENS_LEVELS; l++) {
		if (!kvc_tokens_supported((kvc_tokens_level)l)) {
			printf("tokens: level=%s not on this processor\n",
			       names[l]);
			continue;
		}
		double t0 = now_s();
		for (int i = 0; i < rounds; i++) {
			uint32_t *ids;
			size_t n;
			const char *after;
			if (!kvc_tokens_read_as((kvc_tokens_level)l, p, end,
						tokens, &ids, &n, &after)) {
				fprintf(stderr, "level %s declined\n",
					names[l]);
				exit(1);
			}
			kvi_free(ids);
		}
		double us = (now_s() - t0) / rounds * 1e6;
		printf("tokens: level=%s us_read=%.1f ns_per_id=%.2f\n",
		       names[l], us, us * 1e3 / (double)tokens);
	}
}

static void
copy_packed(void *arg, void *dst)
{
	const char *const *src = arg;
	memcpy(dst, src[0], (size_t)(uintptr_t)src[1]);
}

/* bench_packed times a packed body of the same ids into a request. */
static void
bench_packed(const uint32_t *ids, size_t tokens, int rounds)
{
	const char *params[] = {"model_name", "m"};
	const void *src[2] = {ids, (void *)(uintptr_t)(tokens * 4)};
	double t0 = now_s();
	for (int i = 0; i < rounds; i++) {
		kvc_qreq q = {0};
		kvc_qerr e = {0};
		if (kvc_api_packed_parse(KVC_PACKED_QUERY, params, 1,
					 tokens * 4, copy_packed, src, tokens,
					 &q, &e) != KVI_OK) {
			fprintf(stderr, "packed: %s\n", e.message);
			exit(1);
		}
		kvc_qreq_fini(&q);
	}
	printf("packed: tokens=%zu bytes=%zu us_parse=%.2f\n", tokens,
	       tokens * 4, (now_s() - t0) / rounds * 1e6);
}

/* bench_body times parsing and hashing a 16,000-token /query body. */
static void
bench_body(int rounds)
{
	enum { TOKENS = 16000 };
	size_t cap = TOKENS * 8 + 64, blen = 0;
	char *body = kvi_malloc(cap);
	blen += (size_t)snprintf(body, cap,
				 "{\"model_name\": \"m\", \"token_ids\": [");
	for (int i = 0; i < TOKENS; i++) {
		blen += (size_t)snprintf(body + blen, cap - blen, "%s%d",
					 i ? ", " : "", 100000 + i);
	}
	blen += (size_t)snprintf(body + blen, cap - blen, "]}");
	double t0 = now_s();
	for (int i = 0; i < rounds; i++) {
		kvc_qreq q = {0};
		kvc_qerr e = {0};
		if (kvc_api_query_parse(body, blen, TOKENS, &q, &e) != KVI_OK) {
			fprintf(stderr, "body: %s\n", e.message);
			exit(1);
		}
		kvc_qreq_fini(&q);
	}
	double t1 = now_s();
	kvc_qreq q = {0};
	kvc_qerr e = {0};
	kvc_api_query_parse(body, blen, TOKENS, &q, &e);
	uint64_t *h = kvi_calloc(TOKENS / 16 + 1, sizeof(*h));
	for (int i = 0; i < rounds; i++) {
		kvi_local_hashes(q.token_ids, q.n_tokens, 16,
				 kvi_local_seed(NULL, 0, NULL, 0), h);
		kvi_seq_hashes(KVI_SEQ_ROOT, h, q.n_tokens / 16, h);
	}
	double t2 = now_s();
	printf("body: tokens=%d bytes=%zu us_parse=%.1f us_hash=%.1f\n", TOKENS,
	       blen, (t1 - t0) / rounds * 1e6, (t2 - t1) / rounds * 1e6);
	bench_levels(body, blen, TOKENS, rounds);
	bench_packed(q.token_ids, q.n_tokens, rounds);
	kvc_qreq_fini(&q);
	kvi_free(h);
	kvi_free(body);
}

/* bench_hash_body times parsing a /query_by_hash body of 1,000 hashes. */
static void
bench_hash_body(int rounds)
{
	enum { HASHES = 1000 };
	size_t cap = HASHES * 24 + 64, blen = 0;
	char *body = kvi_malloc(cap);
	blen += (size_t)snprintf(body, cap,
				 "{\"model_name\": \"m\", \"block_hashes\": [");
	for (int i = 0; i < HASHES; i++) {
		uint64_t h = (uint64_t)rand() << 33 ^ (uint64_t)rand() << 11 ^
			     (uint64_t)rand();
		blen += (size_t)snprintf(body + blen, cap - blen, "%s%llu",
					 i ? ", " : "", (unsigned long long)h);
	}
	blen += (size_t)snprintf(body + blen, cap - blen, "]}");
	double t0 = now_s();
	for (int i = 0; i < rounds; i++) {
		kvc_qreq q = {0};
		kvc_qerr e = {0};
		if (kvc_api_hash_query_parse(body, blen, HASHES, &q, &e) !=
		    KVI_OK) {
			fprintf(stderr, "hash body: %s\n", e.message);
			exit(1);
		}
		kvc_qreq_fini(&q);
	}
	printf("hash_body: hashes=%d bytes=%zu us_parse=%.1f\n", HASHES, blen,
	       (now_s() - t0) / rounds * 1e6);
	kvi_free(body);
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr,
			"usage: bench_answer LISTENERS [TOP_K [ROUNDS]]\n");
		return 2;
	}
	size_t n = (size_t)atol(argv[1]);
	uint32_t top_k = argc > 2 ? (uint32_t)atol(argv[2]) : 0;
	int rounds = argc > 3 ? atoi(argv[3]) : 2000;
	kvc_qanswer_match *m = kvi_calloc(n + 1, sizeof(*m));
	char(*pods)[32] = kvi_calloc(n + 1, sizeof(*pods));
	srand(1);
	for (size_t i = 0; i < n; i++) {
		snprintf(pods[i], sizeof(pods[i]), "ns/engine-%zu", i / 2);
		m[i].instance_id =
		    i % 2 ? m[i - 1].instance_id
			  : (uint64_t)rand() << 32 ^ (uint64_t)rand();
		m[i].pod = pods[i];
		m[i].dp_rank = (uint32_t)(i % 2);
		m[i].gpu = 5 + (uint32_t)(rand() % 3);
		m[i].longest = m[i].gpu;
	}
	kvc_qanswer_result r = {.model = "m",
				.block_size = 16,
				.query_blocks = 100,
				.matches = m,
				.n_matches = n,
				.top_k = top_k,
				.shards_answered = 2,
				.shards_total = 2};
	size_t len = 0;
	double t0 = now_s();
	for (int i = 0; i < rounds; i++) {
		kvi_free(kvc_qanswer_text(&r, &len));
	}
	printf("answer: listeners=%zu top_k=%u bytes=%zu us_per_answer=%.1f\n",
	       n, top_k, len, (now_s() - t0) / rounds * 1e6);
	bench_body(rounds);
	bench_hash_body(rounds);
	kvi_free(m);
	kvi_free(pods);
	return 0;
}
