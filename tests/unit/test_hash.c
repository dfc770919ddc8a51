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

/* Prompts with LoRA, salt and multimodal items against
 * vectors/extra_hashes.jsonl, computed apart from this code (hash.h's
 * rule with libxxhash through ctypes). */
static void
test_extra_hash_vectors(void **state)
{
	(void)state;
	json_t *all = vectors_load("vectors/extra_hashes.jsonl");
	size_t i;
	json_t *v;
	json_array_foreach(all, i, v)
	{
		kvi_prompt_keys k = {0};
		k.lora_name = opt_str(v, "lora_name", &k.lora_len);
		k.cache_salt = opt_str(v, "cache_salt", &k.salt_len);
		const json_t *mm = json_object_get(v, "mm_features");
		kvi_mm_item items[8];
		k.n_mm = json_array_size(mm);
		assert_true(k.n_mm <= 8);
		for (size_t j = 0; j < k.n_mm; j++) {
			const json_t *e = json_array_get(mm, j);
			items[j].id =
			    opt_str(e, "identifier", &items[j].id_len);
			items[j].offset = (uint64_t)json_integer_value(
			    json_object_get(e, "offset"));
			items[j].length = (uint64_t)json_integer_value(
			    json_object_get(e, "length"));
		}
		k.mm = items;
		const json_t *toks = json_object_get(v, "token_ids");
		size_t n = json_array_size(toks);
		uint32_t t[64];
		assert_true(n <= 64);
		for (size_t j = 0; j < n; j++) {
			t[j] = (uint32_t)json_integer_value(
			    json_array_get(toks, j));
		}
		size_t bs = (size_t)json_integer_value(
		    json_object_get(v, "block_size"));
		uint64_t out[64];
		kvi_xbuf x = {0};
		size_t blocks = kvi_prompt_hashes(t, n, bs, &k, &x, out);
		kvi_xbuf_fini(&x);
		const json_t *want = json_object_get(v, "local_hashes");
		assert_int_equal(blocks, json_array_size(want));
		for (size_t j = 0; j < blocks; j++) {
			if (out[j] != vectors_u64(json_string_value(
					  json_array_get(want, j)))) {
				fail_msg("%s: block %zu",
					 json_string_value(
					     json_object_get(v, "name")),
					 j);
			}
		}
	}
	json_decref(all);
}

/* What the keys change: a salt the first block only, LoRA every block,
 * an item the blocks it overlaps; plain text keeps tokens_hash. */
static void
test_extra_keys_change_exactly(void **state)
{
	(void)state;
	uint32_t t[12];
	for (int i = 0; i < 12; i++) {
		t[i] = (uint32_t)(i + 1);
	}
	uint64_t plain[3], salted[3], lora[3], img[3], ref[3];
	kvi_xbuf x = {0};
	kvi_prompt_keys none = {0};
	kvi_prompt_hashes(t, 12, 4, &none, &x, plain);
	kvi_local_hashes(t, 12, 4, kvi_local_seed(NULL, 0, NULL, 0), ref);
	assert_memory_equal(plain, ref, sizeof(ref));
	kvi_prompt_keys s = {.cache_salt = "b", .salt_len = 1};
	kvi_prompt_hashes(t, 12, 4, &s, &x, salted);
	assert_true(salted[0] != plain[0]);
	assert_true(salted[1] == plain[1] && salted[2] == plain[2]);
	kvi_prompt_keys l = {.lora_name = "a", .lora_len = 1};
	kvi_prompt_hashes(t, 12, 4, &l, &x, lora);
	for (int i = 0; i < 3; i++) {
		assert_true(lora[i] != plain[i]);
	}
	kvi_mm_item it = {.id = "img", .id_len = 3, .offset = 5, .length = 2};
	kvi_prompt_keys m = {.mm = &it, .n_mm = 1};
	kvi_prompt_hashes(t, 12, 4, &m, &x, img);
	assert_true(img[0] == plain[0] && img[2] == plain[2]);
	assert_true(img[1] != plain[1]);
	/* the same item one token later is another block */
	it.offset = 6;
	uint64_t moved[3];
	kvi_prompt_hashes(t, 12, 4, &m, &x, moved);
	assert_true(moved[1] != img[1] && moved[1] != plain[1]);
	kvi_xbuf_fini(&x);
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
	    cmocka_unit_test(test_extra_hash_vectors),
	    cmocka_unit_test(test_extra_keys_change_exactly),
	    cmocka_unit_test(test_seq_hash_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
