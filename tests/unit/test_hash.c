/*
 * test_hash.c - local hashes against vectors/local_hashes.jsonl, and the
 * sequence-hash chain's defining properties.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hash.h"
#include "vectors.h"

static const char *
opt_str(const json_t *v, const char *key, size_t *len)
{
	const json_t *s = json_object_get(v, key);
	if (s == NULL || json_is_null(s)) {
		*len = 0;
		return NULL;
	}
	*len = json_string_length(s);
	return json_string_value(s);
}

static void
test_local_hash_vectors(void **state)
{
	(void)state;
	json_t *all = vectors_load("vectors/local_hashes.jsonl");
	size_t i;
	json_t *v;
	json_array_foreach(all, i, v)
	{
		size_t lora_len, salt_len;
		const char *lora = opt_str(v, "lora_name", &lora_len);
		const char *salt = opt_str(v, "cache_salt", &salt_len);
		uint64_t seed = kvi_local_seed(lora, lora_len, salt, salt_len);
		assert_true(seed == vectors_u64(json_string_value(
					json_object_get(v, "seed"))));
		const json_t *toks = json_object_get(v, "token_ids");
		size_t n = json_array_size(toks);
		uint32_t *t = malloc(n * sizeof(*t));
		for (size_t k = 0; k < n; k++) {
			t[k] = (uint32_t)json_integer_value(
			    json_array_get(toks, k));
		}
		size_t bs = (size_t)json_integer_value(
		    json_object_get(v, "block_size"));
		uint64_t out[64];
		size_t blocks = kvi_local_hashes(t, n, bs, seed, out);
		const json_t *want = json_object_get(v, "local_hashes");
		assert_int_equal(blocks, json_array_size(want));
		for (size_t k = 0; k < blocks; k++) {
			assert_true(out[k] == vectors_u64(json_string_value(
						  json_array_get(want, k))));
		}
		free(t);
	}
	json_decref(all);
}

static void
test_seq_hash_chain(void **state)
{
	(void)state;
	uint64_t local[4] = {11, 22, 33, 44}, seq[4], again[4];
	kvi_seq_hashes(KVI_SEQ_ROOT, local, 4, seq);
	/* the chain is a fold of kvi_seq_hash */
	uint64_t p = KVI_SEQ_ROOT;
	for (int i = 0; i < 4; i++) {
		p = kvi_seq_hash(p, local[i]);
		assert_true(seq[i] == p);
	}
	/* extending from a block continues the same chain */
	kvi_seq_hashes(seq[1], local + 2, 2, again);
	assert_memory_equal(again, seq + 2, sizeof(again[0]) * 2);
	/* a different first block changes every later key */
	uint64_t other[4] = {12, 22, 33, 44};
	kvi_seq_hashes(KVI_SEQ_ROOT, other, 4, again);
	for (int i = 0; i < 4; i++) {
		assert_true(again[i] != seq[i]);
	}
	/* order matters: (a, b) and (b, a) differ */
	assert_true(kvi_seq_hash(1, 2) != kvi_seq_hash(2, 1));
	/* in place */
	memcpy(again, local, sizeof(local));
	kvi_seq_hashes(KVI_SEQ_ROOT, again, 4, again);
	assert_memory_equal(again, seq, sizeof(seq));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_local_hash_vectors),
	    cmocka_unit_test(test_seq_hash_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
