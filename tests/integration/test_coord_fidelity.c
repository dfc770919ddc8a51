/*
 * test_coord_fidelity.c - the whole cluster against the simulator's
 * ground truth, for the event shapes engines publish today and for keyed
 * prompts. One pod per flavour (vllm, vllm-0.26, sglang, sglang-map), DP
 * 2, every CPU store an offload (no tokens, nil parent, block_size 0).
 * Each pod serves the same prompts: plain text; the same text under two
 * salts; a salt-only prompt; on the vLLM pods the text under a LoRA and
 * two prompts with equal placeholder tokens but different images; a
 * continuation of a salted prompt (its event has a parent and no salt of
 * its own); then enough traffic that the GPU evicts early prompts whose
 * CPU copies stay, and one prompt loaded back from CPU.
 *
 * Every listener must then hold exactly its rank's blocks (external hash,
 * sequence hash, tiers), and /query with the same keys must equal a scan
 * of the truth, tiers included; queries with no salt, another salt,
 * another LoRA or another image must match only what the truth says. The
 * expected figures are also checked against what the prompts imply, so
 * neither side can be vacuous. A second test runs the load generator's
 * keyed prompts (--salts, --loras, --mm-every) over the same fleet.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"
#include "hash.h"
#include "sim_load.h"

#define PODS        4
#define DP          2
#define BS          16
#define MAX_BLOCKS  16
#define PLACEHOLDER 151646u /* an image token id, repeated */
#define MAX_EXP     (PODS * DP)

static const char *const flavours = "vllm,vllm-0.26,sglang,sglang-map";

static bool
is_vllm(int pod)
{
	return pod < 2;
}

/* A prompt: tokens and keys, as both /prefill and /query take them. */
typedef struct prompt {
	uint32_t tokens[MAX_BLOCKS * BS];
	size_t n_blocks;
	const char *salt;
	const char *lora;
	const char *image; /* an item over tokens [16, 56) */
} prompt;

#define IMG_OFFSET 16
#define IMG_LENGTH 40

/* text appends blocks of the ids [first, first + n) to p. */
static void
text(prompt *p, uint64_t first, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		sim_load_block_tokens(first + i, 0, BS,
				      p->tokens + (p->n_blocks + i) * BS);
	}
	p->n_blocks += n;
}

/* image_prompt is a text block, 40 placeholder tokens, then text: 5
 * blocks, the image over blocks 1-3. */
static void
image_prompt(prompt *p, const char *image)
{
	memset(p, 0, sizeof(*p));
	text(p, 21, 5);
	for (size_t i = IMG_OFFSET; i < IMG_OFFSET + IMG_LENGTH; i++) {
		p->tokens[i] = PLACEHOLDER;
	}
	p->image = image;
}

/* keys_json writes the prompt's keys as JSON fields (no braces). */
static void
keys_json(const prompt *p, char *out, size_t len)
{
	int o = 0;
	out[0] = '\0';
	if (p->salt != NULL) {
		o += snprintf(out + o, len - (size_t)o, "\"cache_salt\":\"%s\"",
			      p->salt);
	}
	if (p->lora != NULL) {
		o += snprintf(out + o, len - (size_t)o,
			      "%s\"lora_name\":\"%s\"", o ? "," : "", p->lora);
	}
	if (p->image != NULL) {
		snprintf(out + o, len - (size_t)o,
			 "%s\"mm_features\":[{\"identifier\":\"%s\","
			 "\"offset\":%d,\"length\":%d}]",
			 o ? "," : "", p->image, IMG_OFFSET, IMG_LENGTH);
	}
}

/* prefill runs p on (pod, rank) and returns the reply (json_decref). */
static json_t *
prefill(cluster *c, int pod, int rank, const prompt *p)
{
	json_t *toks = json_array();
	for (size_t i = 0; i < p->n_blocks * BS; i++) {
		json_array_append_new(toks, json_integer(p->tokens[i]));
	}
	char *t = json_dumps(toks, JSON_COMPACT);
	json_decref(toks);
	char keys[512];
	keys_json(p, keys, sizeof(keys));
	size_t len = strlen(t) + strlen(keys) + 128;
	char *body = kvi_malloc(len);
	snprintf(body, len, "{\"pod\":%d,\"rank\":%d,\"token_ids\":%s%s%s}",
		 pod, rank, t, keys[0] ? "," : "", keys);
	free(t);
	json_t *r = clu_sim_post(c, "/prefill", body);
	kvi_free(body);
	return r;
}

/* seq_hashes writes the sequence hashes of p's blocks by hash.h's rule. */
static size_t
seq_hashes(const prompt *p, uint64_t *out)
{
	kvi_mm_item mm = {p->image, p->image ? strlen(p->image) : 0, IMG_OFFSET,
			  IMG_LENGTH};
	kvi_prompt_keys k = {
	    .lora_name = p->lora,
	    .lora_len = p->lora ? strlen(p->lora) : 0,
	    .cache_salt = p->salt,
	    .salt_len = p->salt ? strlen(p->salt) : 0,
	    .mm = p->image ? &mm : NULL,
	    .n_mm = p->image ? 1 : 0,
	};
	kvi_xbuf x = {0};
	size_t n =
	    kvi_prompt_hashes(p->tokens, p->n_blocks * BS, BS, &k, &x, out);
	kvi_xbuf_fini(&x);
	kvi_seq_hashes(KVI_SEQ_ROOT, out, n, out);
	return n;
}

/* A query and what the prompts imply: the pods whose rank holds a match
 * (bit per pod) and its length in blocks. */
typedef struct expectation {
	const char *what;
	prompt q;
	unsigned pods;
	uint32_t blocks;
} expectation;

/* check_query asks e's query and compares the answer with the truth,
 * and the truth with the expectation. Returns the number of matches with
 * a block on CPU only. */
static int
check_query(cluster *c, const clu_truth *truth, const expectation *e)
{
	uint64_t seq[MAX_BLOCKS];
	size_t n = seq_hashes(&e->q, seq);
	clu_expect exp[MAX_EXP];
	int ne = clu_truth_match(truth, seq, n, exp);
	unsigned pods = 0;
	int cpu = 0;
	for (int i = 0; i < ne; i++) {
		pods |= 1u << exp[i].pod;
		cpu += exp[i].cpu > 0;
		if (exp[i].rank != exp[i].pod % DP ||
		    exp[i].longest != e->blocks) {
			fail_msg("%s: the truth has pod %d rank %d with %u "
				 "blocks, expected rank %d with %u",
				 e->what, exp[i].pod, exp[i].rank,
				 exp[i].longest, exp[i].pod % DP, e->blocks);
		}
	}
	if (pods != e->pods) {
		fail_msg("%s: the truth matches pods %#x, expected %#x",
			 e->what, pods, e->pods);
	}
	char keys[512];
	keys_json(&e->q, keys, sizeof(keys));
	json_t *ans = clu_query(c, e->q.tokens, e->q.n_blocks * BS,
				keys[0] ? keys : NULL);
	char why[512];
	if (!clu_check_answer(ans, exp, ne, why, sizeof(why))) {
		char *d = json_dumps(ans, JSON_COMPACT);
		fail_msg("%s: %s; answer %s", e->what, why, d);
	}
	assert_false(json_is_true(json_object_get(ans, "partial")));
	json_decref(ans);
	return cpu;
}

/* shard_of returns the shard /workers says owns rank idx. */
static shardproc *
shard_of(cluster *c, int idx)
{
	return clu_shard_of(c, idx / DP, idx % DP);
}

static int
reply_int(json_t *r, const char *key)
{
	int v = (int)json_integer_value(json_object_get(r, key));
	json_decref(r);
	return v;
}

/* serve runs every prompt of the test on pod's rank pod % DP. */
static void
serve(cluster *c, int pod, const prompt *x, const prompt *y, const prompt *img1,
      const prompt *img2)
{
	int r = pod % DP;
	prompt p = *x, xc = *x;
	assert_int_equal(reply_int(prefill(c, pod, r, &p), "stored_blocks"), 4);
	p.salt = "tenant-a";
	assert_int_equal(reply_int(prefill(c, pod, r, &p), "stored_blocks"), 4);
	p.salt = "tenant-b";
	assert_int_equal(reply_int(prefill(c, pod, r, &p), "stored_blocks"), 4);
	p = *y;
	p.salt = "tenant-a";
	assert_int_equal(reply_int(prefill(c, pod, r, &p), "stored_blocks"), 3);
	if (is_vllm(pod)) {
		p = *x;
		p.lora = "adapter-1";
		assert_int_equal(
		    reply_int(prefill(c, pod, r, &p), "stored_blocks"), 4);
		assert_int_equal(
		    reply_int(prefill(c, pod, r, img1), "stored_blocks"), 5);
		/* the text block before the image is shared */
		assert_int_equal(
		    reply_int(prefill(c, pod, r, img2), "hit_blocks"), 1);
	}
	/* the continuation: a hit of 4, 3 blocks stored under a parent */
	text(&xc, 5, 3);
	xc.salt = "tenant-a";
	assert_int_equal(reply_int(prefill(c, pod, r, &xc), "hit_blocks"), 4);
	/* traffic: early GPU copies are evicted, their CPU copies stay */
	for (uint64_t k = 0; k < 4; k++) {
		prompt f = {0};
		text(&f, 1000 + 100 * k, 8);
		json_decref(prefill(c, pod, r, &f));
	}
	/* Y without salt on pod 3 only: its own, unsalted blocks */
	if (pod == 3) {
		assert_int_equal(
		    reply_int(prefill(c, pod, r, y), "stored_blocks"), 3);
	}
}

/* refused posts body to /prefill and expects a 400. */
static void
refused(cluster *c, const char *body)
{
	json_t *b = json_loads(body, 0, NULL);
	assert_non_null(b);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&c->sim, "POST", "/prefill", b, &r),
			 KVI_OK);
	if (r.status != 400) {
		fail_msg("/prefill %s: %ld, expected 400", body, r.status);
	}
	kvt_http_resp_fini(&r);
	json_decref(b);
}

static void
test_flavours_and_keys_equal_truth(void **state)
{
	cluster *c = *state;
	const char *sim[] = {
	    "--pods",       "4",      "--dp",           "2",
	    "--flavours",   flavours, "--cache-blocks", "40",
	    "--cpu-blocks", "400",    "--offload",      "--offload-bs0",
	    "--paused",     NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);
	clu_wait_active(c, PODS * DP, CLU_WAIT_MS);

	/* keys an engine could not have: refused, nothing published */
	refused(c, "{\"pod\":2,\"rank\":0,\"token_ids\":[1,2],"
		   "\"lora_name\":\"a\"}");
	refused(c, "{\"pod\":3,\"rank\":1,\"hash_ids\":[1,2],"
		   "\"mm_features\":[{\"identifier\":\"i\",\"offset\":0,"
		   "\"length\":4}]}");
	refused(c, "{\"pod\":0,\"rank\":0,\"hash_ids\":[1,2],"
		   "\"mm_features\":[{\"identifier\":\"i\",\"offset\":8,"
		   "\"length\":8},{\"identifier\":\"j\",\"offset\":4,"
		   "\"length\":2}]}");
	refused(c, "{\"pod\":0,\"rank\":0,\"hash_ids\":[1,2],"
		   "\"mm_features\":[{\"identifier\":\"i\",\"offset\":30,"
		   "\"length\":3}]}");
	refused(c, "{\"pod\":0,\"rank\":0,\"hash_ids\":[1],"
		   "\"cache_salt\":7}");

	prompt x = {0}, y = {0}, img1, img2;
	text(&x, 1, 4);
	text(&y, 11, 3);
	image_prompt(&img1, "img-1");
	image_prompt(&img2, "img-2");
	for (int pod = 0; pod < PODS; pod++) {
		serve(c, pod, &x, &y, &img1, &img2);
	}
	/* X's first blocks went to CPU only; X again loads them back */
	for (int pod = 0; pod < PODS; pod++) {
		json_t *r = prefill(c, pod, pod % DP, &x);
		assert_true(json_integer_value(
				json_object_get(r, "cpu_loaded_blocks")) > 0);
		json_decref(r);
	}

	/* every listener holds exactly its rank's blocks */
	for (int idx = 0; idx < PODS * DP; idx++) {
		shc_wait_truth(shard_of(c, idx), &c->sim, &idx, 1, CLU_WAIT_MS);
	}

	const unsigned all = 0xf, vllm = 0x3;
	prompt xa = x, xb = x, xz = x, ya = y, yz = y, xl = x, xl2 = x;
	prompt img3 = img1, bare = img1, xc = x, xc0;
	xa.salt = "tenant-a";
	xb.salt = "tenant-b";
	xz.salt = "tenant-z";
	ya.salt = "tenant-a";
	yz.salt = "tenant-b";
	xl.lora = "adapter-1";
	xl2.lora = "adapter-2";
	img3.image = "img-3";
	bare.image = NULL;
	text(&xc, 5, 3);
	xc0 = xc;
	xc.salt = "tenant-a";
	const expectation ex[] = {
	    {"plain", x, all, 4},
	    {"salt a", xa, all, 4},
	    {"salt b", xb, all, 4},
	    {"another salt", xz, 0, 0},
	    {"salted prompt, its salt", ya, all, 3},
	    {"salted prompt without salt", y, 0x8, 3},
	    {"salted prompt, another salt", yz, 0, 0},
	    {"lora", xl, vllm, 4},
	    {"another lora", xl2, 0, 0},
	    {"image 1", img1, vllm, 5},
	    {"image 2", img2, vllm, 5},
	    {"another image", img3, vllm, 1},
	    {"image tokens without the image", bare, vllm, 1},
	    {"continuation with its salt", xc, all, 7},
	    {"continuation without salt", xc0, all, 4},
	};
	clu_truth *truth = clu_truth_get(c);
	int cpu = 0;
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		cpu += check_query(c, truth, &ex[i]);
	}
	clu_truth_free(truth);
	/* the images hash apart from the block they start in */
	uint64_t s1[MAX_BLOCKS], s2[MAX_BLOCKS];
	seq_hashes(&img1, s1);
	seq_hashes(&img2, s2);
	assert_true(s1[0] == s2[0] && s1[1] != s2[1]);
	/* offloads were matched: some answers had CPU-only blocks */
	assert_true(cpu > 0);
	print_message("%zu queries, %d matches with CPU-only blocks\n",
		      sizeof(ex) / sizeof(ex[0]), cpu);
}

/* The load generator's keyed prompts (salts, LoRA names, images) on every
 * flavour, with offloads and evictions: every listener ends equal to its
 * rank's truth. */
static void
test_generated_keyed_load_equals_truth(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods",
			     "4",
			     "--dp",
			     "2",
			     "--flavours",
			     flavours,
			     "--generate",
			     "600",
			     "--salts",
			     "3",
			     "--loras",
			     "2",
			     "--mm-every",
			     "3",
			     "--cache-blocks",
			     "300",
			     "--cpu-blocks",
			     "900",
			     "--offload",
			     "--rate",
			     "0",
			     "--paused",
			     NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, true, NULL);
	clu_wait_active(c, PODS * DP, CLU_WAIT_MS);
	json_decref(clu_sim_post(c, "/resume", "{}"));
	assert_true(kvt_wait_until(clu_sim_load_done, c, 60000));
	for (int idx = 0; idx < PODS * DP; idx++) {
		shc_wait_truth(shard_of(c, idx), &c->sim, &idx, 1, CLU_WAIT_MS);
	}
	/* not vacuous: every rank served, and GPU copies were evicted */
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&c->sim, "GET", "/status", NULL, &r),
			 KVI_OK);
	assert_int_equal(
	    json_integer_value(json_object_get(r.json, "requests_done")), 600);
	assert_true(
	    json_integer_value(json_object_get(r.json, "removed_blocks")) > 0);
	size_t i;
	json_t *rank;
	json_array_foreach(json_object_get(r.json, "ranks"), i, rank)
	{
		assert_true(json_integer_value(
				json_object_get(rank, "cpu_blocks")) > 0);
	}
	kvt_http_resp_fini(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_flavours_and_keys_equal_truth,
					    clu_test_setup, clu_test_teardown),
	    cmocka_unit_test_setup_teardown(
		test_generated_keyed_load_equals_truth, clu_test_setup,
		clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
