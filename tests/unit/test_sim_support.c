/*
 * Unit tests of the simulator's pure support modules: the seq ring, the
 * u64-exact JSON writer, the /kv_recover decision and answers, and the
 * load (trace parsing, token derivation, copies, generation, loops).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "alloc.h"
#include "sim_cache.h"
#include "sim_json.h"
#include "sim_load.h"
#include "sim_recover.h"
#include "sim_ring.h"

static void *
blob(uint64_t v)
{
	uint64_t *p = kvi_malloc(sizeof(v));
	*p = v;
	return p;
}

static void
test_ring(void **state)
{
	(void)state;
	sim_ring r;
	uint64_t oldest;
	sim_ring_init(&r, 3);
	assert_false(sim_ring_oldest(&r, &oldest));
	assert_null(sim_ring_get(&r, 0));
	for (uint64_t i = 0; i < 5; i++) {
		assert_true(sim_ring_put(&r, blob(i * 10), 8, (unsigned)i) ==
			    i);
	}
	assert_true(sim_ring_oldest(&r, &oldest));
	assert_true(oldest == 2);
	assert_null(sim_ring_get(&r, 1));
	assert_null(sim_ring_get(&r, 5));
	for (uint64_t s = 2; s < 5; s++) {
		sim_ring_entry *e = sim_ring_get(&r, s);
		assert_non_null(e);
		assert_true(e->seq == s);
		assert_true(*(uint64_t *)e->data == s * 10);
		assert_int_equal(e->flags, s);
	}
	sim_ring_clear(&r);
	assert_false(sim_ring_oldest(&r, &oldest));
	assert_true(sim_ring_put(&r, blob(7), 8, 0) == 0);
	sim_ring_fini(&r);

	sim_ring_init(&r, 0); /* keeps nothing, still counts seqs */
	assert_true(sim_ring_put(&r, blob(1), 8, 0) == 0);
	assert_true(sim_ring_put(&r, blob(2), 8, 0) == 1);
	assert_false(sim_ring_oldest(&r, &oldest));
	sim_ring_fini(&r);
}

static void
test_json_writer(void **state)
{
	(void)state;
	sim_buf b;
	sim_buf_init(&b);
	sim_buf_u64(&b, UINT64_MAX);
	sim_buf_puts(&b, " ");
	sim_buf_u64(&b, 0);
	sim_buf_puts(&b, " ");
	sim_buf_i64(&b, INT64_MIN);
	sim_buf_puts(&b, " ");
	sim_buf_str(&b, "a\"b\\c\n");
	size_t len;
	char *text = sim_buf_release(&b, &len);
	assert_string_equal(text,
			    "18446744073709551615 0 "
			    "-9223372036854775808 \"a\\\"b\\\\c\\u000a\"");
	assert_int_equal(len, strlen(text));
	kvi_free(text);

	uint64_t v;
	assert_true(sim_parse_u64("18446744073709551615", &v));
	assert_true(v == UINT64_MAX);
	assert_true(sim_parse_u64("007", &v) && v == 7);
	assert_false(sim_parse_u64("18446744073709551616", &v));
	assert_false(sim_parse_u64("", &v));
	assert_false(sim_parse_u64("-1", &v));
	assert_false(sim_parse_u64("1 ", &v));
	assert_false(sim_parse_u64(NULL, &v));
}

static void
test_recover_decide(void **state)
{
	(void)state;
	sim_ring log;
	sim_ring_init(&log, 2);
	for (int i = 0; i < 4; i++) { /* holds seqs 2 and 3 */
		sim_ring_put(&log, blob(0), 8, 0);
	}
	sim_recover_query q = {0};
	assert_int_equal(sim_recover_decide(&q, &log, true, 3),
			 SIM_RECOVER_TREE_DUMP);
	q = (sim_recover_query){true, 3, 2};
	assert_int_equal(sim_recover_decide(&q, &log, true, 3),
			 SIM_RECOVER_INVALID_RANGE);
	q = (sim_recover_query){true, 4, 9};
	assert_int_equal(sim_recover_decide(&q, &log, true, 3),
			 SIM_RECOVER_TOO_NEW);
	q = (sim_recover_query){true, 0, 0};
	assert_int_equal(sim_recover_decide(&q, &log, false, 0),
			 SIM_RECOVER_TOO_NEW);
	q = (sim_recover_query){true, 2, 9};
	assert_int_equal(sim_recover_decide(&q, &log, true, 3),
			 SIM_RECOVER_EVENTS);
	q = (sim_recover_query){true, 1, 3};
	assert_int_equal(sim_recover_decide(&q, &log, true, 3),
			 SIM_RECOVER_TREE_DUMP);
	sim_ring_fini(&log);

	sim_recover_kind k;
	assert_true(sim_recover_kind_parse("hang", &k));
	assert_int_equal(k, SIM_RECOVER_HANG);
	assert_false(sim_recover_kind_parse("events", &k));
	assert_string_equal(sim_recover_kind_name(SIM_RECOVER_TOO_NEW),
			    "too_new");
}

/* valid_json checks that text parses (big integers as reals: jansson
 * cannot hold u64s, which is the point of the writer). */
static void
valid_json(const char *text)
{
	json_error_t err;
	json_t *v = json_loads(text, JSON_DECODE_INT_AS_REAL, &err);
	if (v == NULL) {
		fail_msg("invalid JSON (%s): %s", err.text, text);
	}
	json_decref(v);
}

static void
test_recover_answers(void **state)
{
	(void)state;
	/* A batch: stored (2 blocks under a parent), removed, cleared. */
	sim_batch b;
	sim_batch_init(&b, 4);
	sim_cache_config cfg = {.gpu_blocks = 2, .block_size = 4, .salt = 1};
	sim_cache *c = sim_cache_alloc(&cfg);
	uint32_t tok[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	sim_request_result res;
	sim_cache_run(c, &b, tok, 2, &res);
	sim_cache_run(c, &b, tok + 4, 2, &res); /* evicts two */
	sim_cache_clear(c, &b);
	assert_int_equal(b.n_events, 4);
	b.ext[0] = UINT64_MAX; /* a hash >= 2^63 must stay exact */

	sim_ring log;
	sim_ring_init(&log, 8);
	size_t len;
	void *rec = sim_recover_record(&b, &len);
	sim_ring_put(&log, rec, len, 0);
	sim_recover_origin o = {.worker_id = 3, .dp_rank = 1};
	sim_buf out;
	sim_buf_init(&out);
	sim_recover_write_events(&out, &o, &log, 0, 0);
	size_t n;
	char *text = sim_buf_release(&out, &n);
	valid_json(text);
	assert_non_null(strstr(text,
			       "{\"Events\":{\"events\":[{\"worker_id\":3,"
			       "\"storage_tier\":\"Device\",\"event\":{"
			       "\"event_id\":0,\"dp_rank\":1,\"data\":{"
			       "\"stored\":{\"parent_hash\":null,"
			       "\"blocks\":[{\"block_hash\":"
			       "18446744073709551615,\"tokens_hash\":"));
	assert_non_null(strstr(text, "{\"removed\":{\"block_hashes\":["));
	assert_non_null(strstr(text, "\"data\":\"cleared\"}}"));
	assert_non_null(strstr(text, "],\"last_event_id\":0}}"));
	kvi_free(text);

	sim_cache_run(c, &b, tok, 2, &res);
	sim_batch_reset(&b);
	sim_cache_run(c, &b, tok, 3, &res);
	size_t nb;
	sim_block_info *blocks = sim_cache_snapshot(c, &nb);
	assert_int_equal(nb, 2);
	sim_recover_write_dump(&out, &o, blocks, nb, true, 41);
	text = sim_buf_release(&out, &n);
	valid_json(text);
	assert_non_null(strstr(text, "\"last_event_id\":41}}"));
	assert_non_null(strstr(text, "\"event_id\":1,"));
	kvi_free(text);
	kvi_free(blocks);

	sim_recover_query q = {true, 5, 9};
	sim_recover_write_too_new(&out, &q, false, 0);
	sim_recover_write_invalid_range(&out, &q);
	sim_recover_write_error(&out, "no \"luck\"");
	text = sim_buf_release(&out, &n);
	assert_string_equal(
	    text, "{\"TooNew\":{\"requested_start\":5,\"requested_end\":"
		  "9,\"newest_available\":null}}"
		  "{\"InvalidRange\":{\"start_id\":5,\"end_id\":9}}"
		  "{\"Error\":\"no \\\"luck\\\"\"}");
	kvi_free(text);
	sim_ring_fini(&log);
	sim_cache_free(c);
	sim_batch_fini(&b);
}

static void
test_trace_line(void **state)
{
	(void)state;
	uint64_t *ids;
	size_t n;
	const char *ok = "{\"timestamp\": 0, \"hash_ids\": [0, 7, 12]}";
	assert_int_equal(sim_trace_parse_line(ok, strlen(ok), &ids, &n),
			 KVI_OK);
	assert_int_equal(n, 3);
	assert_true(ids[1] == 7);
	kvi_free(ids);
	const char *bad[] = {"{\"hash_ids\": [1, -2]}", "{\"ids\": []}",
			     "[1, 2]", "{\"hash_ids\": [1, \"x\"]}", "{"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
		    sim_trace_parse_line(bad[i], strlen(bad[i]), &ids, &n),
		    KVI_EPROTO);
	}
}

static void
test_block_tokens(void **state)
{
	(void)state;
	uint32_t a[16], b[16], c[16];
	sim_load_block_tokens(42, 0, 16, a);
	sim_load_block_tokens(42, 0, 16, b);
	sim_load_block_tokens(42, 1, 16, c);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_not_equal(a, c, sizeof(a));
	for (int i = 0; i < 16; i++) {
		assert_true(a[i] < SIM_VOCAB);
	}
	uint64_t ids[] = {42};
	uint32_t blocks;
	uint32_t *t = sim_load_expand(ids, 1, 2, 16, &blocks);
	assert_int_equal(blocks, 2);
	assert_memory_equal(t, a, sizeof(a));
	assert_memory_equal(t + 16, c, sizeof(c));
	kvi_free(t);
}

static void
test_trace_copies(void **state)
{
	(void)state;
	char path[512];
	snprintf(path, sizeof(path),
		 "%s/traces/mooncake_arxiv_trace_1000.jsonl", KVI_DATA_DIR);
	sim_load_config cfg = {.trace_path = path,
			       .copies = 2,
			       .blocks_per_id = 1,
			       .block_size = 8};
	sim_load *l;
	char err[256];
	assert_int_equal(sim_load_open(&cfg, &l, err, sizeof(err)), KVI_OK);
	assert_true(sim_load_total(l) == 2000);
	const uint32_t *tok;
	uint32_t n0, n1, n2;
	uint32_t first[3][8];
	assert_true(sim_load_next(l, &tok, &n0));
	memcpy(first[0], tok, sizeof(first[0]));
	assert_true(sim_load_next(l, &tok, &n1));
	memcpy(first[1], tok, sizeof(first[1]));
	assert_true(sim_load_next(l, &tok, &n2));
	memcpy(first[2], tok, sizeof(first[2]));
	/* Line 0 twice (copies 0 and 1), then line 1, whose first id is
	 * line 0's. */
	assert_int_equal(n0, 14);
	assert_int_equal(n1, 14);
	assert_int_equal(n2, 15);
	assert_memory_not_equal(first[0], first[1], sizeof(first[0]));
	assert_memory_equal(first[0], first[2], sizeof(first[0]));
	sim_load_free(l);

	cfg.trace_path = "/nonexistent/trace.jsonl";
	assert_int_equal(sim_load_open(&cfg, &l, err, sizeof(err)), KVI_ENOENT);
}

static void
test_generate_and_loop(void **state)
{
	(void)state;
	sim_load_config cfg = {.generate = 5,
			       .copies = 1,
			       .blocks_per_id = 1,
			       .block_size = 4,
			       .loop = true,
			       .requests = 12,
			       .seed = 9};
	sim_load *l;
	char err[256];
	assert_int_equal(sim_load_open(&cfg, &l, err, sizeof(err)), KVI_OK);
	assert_true(sim_load_total(l) == 12);
	uint32_t *pass[5];
	uint32_t len[5];
	const uint32_t *tok;
	uint32_t n;
	for (int i = 0; i < 12; i++) {
		assert_true(sim_load_next(l, &tok, &n));
		assert_true(n >= 5); /* a system prompt and a suffix */
		if (i < 5) {
			len[i] = n;
			pass[i] = kvi_malloc(n * 4 * sizeof(uint32_t));
			memcpy(pass[i], tok, n * 4 * sizeof(uint32_t));
		} else {
			/* Every pass repeats the first. */
			assert_int_equal(n, len[i % 5]);
			assert_memory_equal(tok, pass[i % 5],
					    n * 4 * sizeof(uint32_t));
		}
	}
	assert_false(sim_load_next(l, &tok, &n));
	sim_load_free(l);
	for (int i = 0; i < 5; i++) {
		kvi_free(pass[i]);
	}
	cfg.generate = 0;
	assert_int_equal(sim_load_open(&cfg, &l, err, sizeof(err)), KVI_EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ring),
	    cmocka_unit_test(test_json_writer),
	    cmocka_unit_test(test_recover_decide),
	    cmocka_unit_test(test_recover_answers),
	    cmocka_unit_test(test_trace_line),
	    cmocka_unit_test(test_block_tokens),
	    cmocka_unit_test(test_trace_copies),
	    cmocka_unit_test(test_generate_and_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
