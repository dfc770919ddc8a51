/*
 * test_wire.c - the event decoder against the engines' own encoder.
 *
 * Every vector of vectors/vllm_events.jsonl and vectors/engine_events.jsonl
 * (the engines' own encoders, with extra keys, salts, offloads and unknown
 * events) decodes to its "expect"; every
 * valid vector cut short at every byte, and with a wrong type in every field,
 * is rejected with a message that names the field; hand-made payloads cover
 * the rest of docs/wire.md#event-batches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "vectors.h"
#include "wire.h"
#include "wire_encode.h"

static kvi_decoder *dec;

static int
setup(void **state)
{
	(void)state;
	dec = kvi_decoder_alloc();
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	kvi_decoder_free(dec);
	return 0;
}

static void
check_str(const char *what, const json_t *want, kvi_str got)
{
	if (json_is_null(want)) {
		if (got.ptr != NULL) {
			fail_msg("%s: expected null, got \"%.*s\"", what,
				 (int)got.len, got.ptr);
		}
		return;
	}
	assert_non_null(got.ptr);
	const char *w = json_string_value(want);
	assert_non_null(w);
	assert_int_equal(strlen(w), got.len);
	assert_memory_equal(w, got.ptr, got.len);
}

static void
check_hashes(const json_t *ev, const kvi_event *got)
{
	const json_t *want = json_object_get(ev, "block_hashes");
	const json_t *want_hex = json_object_get(ev, "block_hashes_bytes_hex");
	const json_t *list = want != NULL ? want : want_hex;
	assert_non_null(list);
	assert_int_equal(json_array_size(list), got->n_hashes);
	for (size_t i = 0; i < got->n_hashes; i++) {
		const char *s = json_string_value(json_array_get(list, i));
		uint64_t h;
		if (want != NULL) {
			h = vectors_u64(s);
		} else {
			size_t n;
			uint8_t *b = vectors_hex(s, &n);
			h = kvi_hash_from_bytes(b, n);
			free(b);
		}
		assert_true(h == got->hashes[i]);
	}
}

static void
check_stored(const json_t *ev, const kvi_event *got)
{
	const json_t *parent = json_object_get(ev, "parent");
	if (json_is_null(parent)) {
		assert_false(got->has_parent);
	} else {
		assert_true(got->has_parent);
		assert_true(got->parent ==
			    vectors_u64(json_string_value(parent)));
	}
	const json_t *tokens = json_object_get(ev, "token_ids");
	assert_int_equal(json_array_size(tokens), got->n_tokens);
	for (size_t i = 0; i < got->n_tokens; i++) {
		assert_true((uint64_t)json_integer_value(
				json_array_get(tokens, i)) == got->tokens[i]);
	}
	assert_int_equal(json_integer_value(json_object_get(ev, "block_size")),
			 got->block_size);
	check_str("lora_name", json_object_get(ev, "lora_name"),
		  got->lora_name);
	const json_t *group = json_object_get(ev, "group_idx");
	if (group != NULL) {
		assert_int_equal(!json_is_null(group), got->has_group_idx);
		if (!json_is_null(group)) {
			assert_int_equal(json_integer_value(group),
					 got->group_idx);
		}
	}
	const json_t *locality = json_object_get(ev, "locality");
	if (locality != NULL) {
		check_str("locality", locality, got->locality);
		assert_int_equal(
		    strcmp(json_string_value(locality), "REMOTE") == 0,
		    got->remote);
	} else {
		assert_false(got->remote);
	}
}

/* check_keys compares what the extra keys became: the salt, each block's
 * extra bytes and the local hashes, when the vector says. */
static void
check_keys(const json_t *ev, const kvi_event *got)
{
	const json_t *salt = json_object_get(ev, "cache_salt");
	if (salt != NULL) {
		check_str("cache_salt", salt, got->cache_salt);
	}
	const json_t *xs = json_object_get(ev, "extra_hex");
	for (size_t i = 0; xs != NULL && i < json_array_size(xs); i++) {
		size_t n;
		uint8_t *want =
		    vectors_hex(json_string_value(json_array_get(xs, i)), &n);
		size_t have = got->extra_off == NULL
				  ? 0
				  : got->extra_off[i + 1] - got->extra_off[i];
		assert_int_equal(have, n);
		if (n > 0) {
			assert_memory_equal(got->extra + got->extra_off[i],
					    want, n);
		}
		free(want);
	}
	const json_t *lh = json_object_get(ev, "local_hashes");
	if (lh == NULL || json_array_size(lh) == 0) {
		return;
	}
	uint64_t out[16];
	assert_true(got->n_hashes <= 16);
	assert_int_equal(json_array_size(lh), got->n_hashes);
	kvi_event_local_hashes(got, out);
	for (size_t i = 0; i < got->n_hashes; i++) {
		assert_true(out[i] == vectors_u64(json_string_value(
					  json_array_get(lh, i))));
	}
}

static void
check_event(const json_t *ev, const kvi_event *got)
{
	const char *type = json_string_value(json_object_get(ev, "type"));
	if (strcmp(type, "skipped") == 0) {
		assert_int_equal(got->type, KVI_EVENT_SKIPPED);
		assert_string_equal(
		    kvi_skip_name(got->skip),
		    json_string_value(json_object_get(ev, "skip")));
		return;
	}
	if (strcmp(type, "cleared") == 0) {
		assert_int_equal(got->type, KVI_EVENT_CLEARED);
		return;
	}
	assert_int_equal(got->type, strcmp(type, "stored") == 0
					? KVI_EVENT_STORED
					: KVI_EVENT_REMOVED);
	check_hashes(ev, got);
	const json_t *medium = json_object_get(ev, "medium");
	check_str("medium", medium, got->medium);
	assert_int_equal(
	    got->tier,
	    json_is_null(medium)
		? KVI_TIER_GPU
		: kvi_tier_from_medium(json_string_value(medium),
				       strlen(json_string_value(medium))));
	if (got->type == KVI_EVENT_STORED) {
		check_stored(ev, got);
		check_keys(ev, got);
	}
}

static void
test_vectors_decode_to_expect(void **state)
{
	json_t *all = vectors_load((const char *)*state);
	size_t i;
	json_t *v;
	json_array_foreach(all, i, v)
	{
		const char *name =
		    json_string_value(json_object_get(v, "name"));
		size_t len;
		uint8_t *buf = vectors_hex(
		    json_string_value(json_object_get(v, "hex")), &len);
		const json_t *expect = json_object_get(v, "expect");
		kvi_batch b;
		kvi_err rv = kvi_decoder_decode(dec, buf, len, &b);
		const json_t *error = json_object_get(expect, "error");
		if (error != NULL) {
			if (rv == KVI_OK) {
				fail_msg("%s: decoded, expected an error",
					 name);
			}
			assert_string_equal(kvi_decoder_error(dec),
					    json_string_value(error));
			free(buf);
			continue;
		}
		if (rv != KVI_OK) {
			fail_msg("%s: %s", name, kvi_decoder_error(dec));
		}
		const json_t *rank = json_object_get(expect, "dp_rank");
		assert_int_equal(!json_is_null(rank), b.has_dp_rank);
		if (b.has_dp_rank) {
			assert_int_equal(json_integer_value(rank), b.dp_rank);
		}
		/* the rank alone, without the events, is the same */
		bool has;
		uint16_t r = 0;
		assert_int_equal(kvi_batch_rank(buf, len, &has, &r), KVI_OK);
		assert_int_equal(has, b.has_dp_rank);
		assert_int_equal(r, b.has_dp_rank ? b.dp_rank : 0);
		const json_t *events = json_object_get(expect, "events");
		assert_int_equal(json_array_size(events), b.n_events);
		for (size_t e = 0; e < b.n_events; e++) {
			check_event(json_array_get(events, e), &b.events[e]);
		}
		free(buf);
	}
	json_decref(all);
}

static void
test_vectors_truncated_at_every_byte(void **state)
{
	json_t *all = vectors_load((const char *)*state);
	size_t i;
	json_t *v;
	json_array_foreach(all, i, v)
	{
		size_t len;
		uint8_t *buf = vectors_hex(
		    json_string_value(json_object_get(v, "hex")), &len);
		for (size_t cut = 0; cut < len; cut++) {
			/* A fresh copy of exactly cut bytes, so ASan sees
			 * any read past the end. */
			uint8_t *part = malloc(cut ? cut : 1);
			memcpy(part, buf, cut);
			kvi_batch b;
			assert_int_not_equal(
			    kvi_decoder_decode(dec, part, cut, &b), KVI_OK);
			assert_true(strlen(kvi_decoder_error(dec)) > 0);
			/* the rank reader stays inside the bytes too */
			bool has;
			uint16_t r;
			(void)kvi_batch_rank(part, cut, &has, &r);
			free(part);
		}
		free(buf);
	}
	json_decref(all);
}

#define VLLM_VECTORS   ((void *)"vectors/vllm_events.jsonl")
#define ENGINE_VECTORS ((void *)"vectors/engine_events.jsonl")

/* ---- wrong types --------------------------------------------------- */

/* Field names of BlockStored in legacy order, and of BlockRemoved. */
static const char *const stored_fields[] = {"block_hashes",
					    "parent_block_hash",
					    "token_ids",
					    "block_size",
					    "lora_id",
					    "medium",
					    "lora_name",
					    "extra_keys",
					    "group_idx",
					    "kv_cache_spec_kind",
					    "kv_cache_spec_sliding_window"};
static const char *const removed_fields[] = {"block_hashes", "medium",
					     "group_idx"};

/* Wrong for every field: no field takes a map or a bool. */
static const msgpack_object wrong_values[] = {
    {.type = MSGPACK_OBJECT_MAP},
    {.type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = true},
};

/* skipped_in returns how many events of root the decoder skips, and
 * whether event ev (if ev >= 0) is one of them. */
static uint32_t
skipped_in(const msgpack_object *root, int ev, bool *ev_skipped)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	assert_int_equal(msgpack_pack_object(&pk, *root), 0);
	kvi_batch b = {0};
	uint32_t n = 0;
	*ev_skipped = false;
	if (kvi_decoder_decode(dec, sb.data, sb.size, &b) == KVI_OK) {
		n = b.n_skipped;
		*ev_skipped = ev >= 0 && b.events[ev].type == KVI_EVENT_SKIPPED;
	}
	msgpack_sbuffer_destroy(&sb);
	return n;
}

/* reject_each_wrong replaces *slot with each wrong value, re-encodes root
 * and checks the decoder rejects it naming field: the whole batch for a
 * field of the envelope (ev < 0), else only event ev, skipped as
 * malformed while the batch and its other events decode. Then it restores
 * *slot. A map is SGLang's metadata in lora_name's place, so it is not
 * wrong there. */
static void
reject_each_wrong(const msgpack_object *root, msgpack_object *slot,
		  const char *field, const char *vector, int ev)
{
	msgpack_object saved = *slot;
	bool was_skipped;
	uint32_t base = skipped_in(root, ev, &was_skipped);
	if (was_skipped) {
		return; /* an event of an unknown type: no field is read */
	}
	for (size_t w = 0; w < sizeof(wrong_values) / sizeof(wrong_values[0]);
	     w++) {
		if (w == 0 && strcmp(field, "lora_name") == 0) {
			continue;
		}
		*slot = wrong_values[w];
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		assert_int_equal(msgpack_pack_object(&pk, *root), 0);
		kvi_batch b;
		kvi_err rv = kvi_decoder_decode(dec, sb.data, sb.size, &b);
		const char *what = w == 0 ? "map" : "bool";
		const char *err = kvi_decoder_error(dec);
		if (ev < 0 && rv == KVI_OK) {
			fail_msg("%s: %s as %s was accepted", vector, field,
				 what);
		} else if (ev >= 0 && rv != KVI_OK) {
			fail_msg("%s: %s as %s lost the batch: %s", vector,
				 field, what, err);
		} else if (ev >= 0) {
			assert_int_equal(b.n_skipped, base + 1);
			if (b.events[ev].type != KVI_EVENT_SKIPPED ||
			    b.events[ev].skip != KVI_SKIP_MALFORMED) {
				fail_msg("%s: %s as %s was accepted", vector,
					 field, what);
			}
			err = kvi_decoder_skip_error(dec);
		}
		if (strstr(err, field) == NULL) {
			fail_msg("%s: error \"%s\" does not name %s", vector,
				 err, field);
		}
		msgpack_sbuffer_destroy(&sb);
	}
	*slot = saved;
}

static void
reject_wrong_elements(const msgpack_object *root, msgpack_object *arr,
		      const char *field, const char *vector, int e)
{
	if (arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size == 0) {
		return;
	}
	char name[96];
	snprintf(name, sizeof(name), "%.80s[0]", field);
	reject_each_wrong(root, &arr->via.array.ptr[0], name, vector, e);
}

static void
wrong_types_in_event(const msgpack_object *root, msgpack_object *ev,
		     const char *vector, int e)
{
	if (ev->type == MSGPACK_OBJECT_ARRAY) {
		msgpack_object *f = ev->via.array.ptr;
		uint32_t n = ev->via.array.size;
		const char *tag = f[0].via.str.ptr;
		const char *const *names = NULL;
		size_t known = 0;
		if (strncmp(tag, "BlockStored", 11) == 0) {
			names = stored_fields;
			known = sizeof(stored_fields) / sizeof(*stored_fields);
		} else if (strncmp(tag, "BlockRemoved", 12) == 0) {
			names = removed_fields;
			known =
			    sizeof(removed_fields) / sizeof(*removed_fields);
		}
		reject_each_wrong(root, &f[0], "type", vector, e);
		for (uint32_t i = 1; i < n && i - 1 < known; i++) {
			reject_each_wrong(root, &f[i], names[i - 1], vector, e);
			if (i == 1 || i == 3) { /* hashes, tokens */
				reject_wrong_elements(root, &f[i], names[i - 1],
						      vector, e);
			}
		}
		return;
	}
	assert_int_equal(ev->type, MSGPACK_OBJECT_MAP);
	for (uint32_t i = 0; i < ev->via.map.size; i++) {
		msgpack_object_kv *kv = &ev->via.map.ptr[i];
		char key[64];
		snprintf(key, sizeof(key), "%.*s", (int)kv->key.via.str.size,
			 kv->key.via.str.ptr);
		bool known = strcmp(key, "locality") == 0 ||
			     strcmp(key, "cache_salt") == 0 ||
			     strcmp(key, "metadata") == 0;
		for (size_t f = 0;
		     f < sizeof(stored_fields) / sizeof(*stored_fields); f++) {
			known = known || strcmp(key, stored_fields[f]) == 0;
		}
		if (strcmp(key, "type") == 0) {
			reject_each_wrong(root, &kv->val, "type", vector, e);
		} else if (known && strcmp(key, "metadata") != 0) {
			reject_each_wrong(root, &kv->val, key, vector, e);
			if (strcmp(key, "block_hashes") == 0 ||
			    strcmp(key, "token_ids") == 0) {
				reject_wrong_elements(root, &kv->val, key,
						      vector, e);
			}
		}
	}
}

static void
test_vectors_wrong_type_in_each_field(void **state)
{
	json_t *all = vectors_load((const char *)*state);
	size_t i;
	json_t *v;
	json_array_foreach(all, i, v)
	{
		const char *name =
		    json_string_value(json_object_get(v, "name"));
		if (json_object_get(json_object_get(v, "expect"), "error")) {
			continue;
		}
		size_t len;
		uint8_t *buf = vectors_hex(
		    json_string_value(json_object_get(v, "hex")), &len);
		msgpack_zone zone;
		msgpack_zone_init(&zone, 4096);
		msgpack_object root;
		size_t off = 0;
		assert_int_equal(
		    msgpack_unpack((const char *)buf, len, &off, &zone, &root),
		    MSGPACK_UNPACK_SUCCESS);
		msgpack_object *ts, *events, *rank = NULL;
		if (root.type == MSGPACK_OBJECT_ARRAY) {
			ts = &root.via.array.ptr[0];
			events = &root.via.array.ptr[1];
			if (root.via.array.size > 2) {
				rank = &root.via.array.ptr[2];
			}
		} else {
			ts = &root.via.map.ptr[0].val;
			events = &root.via.map.ptr[1].val;
			rank = &root.via.map.ptr[2].val;
		}
		reject_each_wrong(&root, ts, "ts", name, -1);
		reject_each_wrong(&root, events, "events", name, -1);
		if (rank != NULL) {
			reject_each_wrong(&root, rank, "data_parallel_rank",
					  name, -1);
		}
		for (uint32_t e = 0; e < events->via.array.size; e++) {
			wrong_types_in_event(&root, &events->via.array.ptr[e],
					     name, (int)e);
		}
		msgpack_zone_destroy(&zone);
		free(buf);
	}
	json_decref(all);
}

/* ---- hand-made payloads -------------------------------------------- */

static kvi_err
decode_hex(const char *hex, kvi_batch *b)
{
	size_t len;
	uint8_t *buf = vectors_hex(hex, &len);
	kvi_err rv = kvi_decoder_decode(dec, buf, len, b);
	free(buf);
	return rv;
}

/* decode_skipped decodes hex, a batch whose only event the decoder must
 * skip for why, and returns the skip's message. */
static const char *
decode_skipped(const char *hex, kvi_skip why)
{
	kvi_batch b;
	assert_int_equal(decode_hex(hex, &b), KVI_OK);
	assert_int_equal(b.n_events, 1);
	assert_int_equal(b.n_skipped, 1);
	assert_int_equal(b.events[0].type, KVI_EVENT_SKIPPED);
	assert_int_equal(b.events[0].skip, why);
	assert_string_equal(kvi_decoder_error(dec), "");
	return kvi_decoder_skip_error(dec);
}

static void
test_hash_forms(void **state)
{
	(void)state;
	kvi_batch b;
	/* [1, [["BlockRemoved", [-1 (fixint), -2 (int64), 0xff (u8),
	 *   bin16 ...0102030405060708]]]] */
	assert_int_equal(decode_hex("9201919"
				    "2ac426c6f636b52656d6f766564"
				    "94ffd3fffffffffffffffeccff"
				    "c410aaaaaaaaaaaaaaaa0102030405060708",
				    &b),
			 KVI_OK);
	assert_int_equal(b.n_events, 1);
	const kvi_event *ev = &b.events[0];
	assert_int_equal(ev->n_hashes, 4);
	assert_true(ev->hashes[0] == UINT64_MAX);
	assert_true(ev->hashes[1] == UINT64_MAX - 1);
	assert_true(ev->hashes[2] == 0xff);
	assert_true(ev->hashes[3] == 0x0102030405060708ull);
	assert_false(b.has_dp_rank);
	/* a 4-byte bin is not a hash */
	assert_non_null(strstr(decode_skipped("9201919"
					      "2ac426c6f636b52656d6f766564"
					      "91c40401020304",
					      KVI_SKIP_MALFORMED),
			       "block_hashes[0]"));
}

static void
test_rank_values(void **state)
{
	(void)state;
	kvi_batch b;
	/* [1.0, [], -1] */
	assert_int_equal(decode_hex("93cb3ff000000000000090ff", &b),
			 KVI_ERANGE);
	assert_string_equal(kvi_decoder_error(dec),
			    "data_parallel_rank -1 does not fit in u16");
	/* [1.0, [], 65535] */
	assert_int_equal(decode_hex("93cb3ff000000000000090cdffff", &b),
			 KVI_OK);
	assert_true(b.has_dp_rank && b.dp_rank == 65535);
	/* [1.0, [], "1"] */
	assert_int_equal(decode_hex("93cb3ff000000000000090a131", &b),
			 KVI_EPROTO);
	assert_string_equal(kvi_decoder_error(dec),
			    "data_parallel_rank: expected int or nil, got str");
	/* [1.0, [], nil, "extra"] : extra trailing elements are ignored */
	assert_int_equal(decode_hex("94cb3ff000000000000090c0a178", &b),
			 KVI_OK);
	assert_false(b.has_dp_rank);
	assert_int_equal(b.n_events, 0);
}

static void
test_token_ranges(void **state)
{
	(void)state;
	kvi_encoder enc;
	kvi_encoder_init(&enc, KVI_FORM_LEGACY, KVI_HASH_UINT);
	uint64_t h = 9;
	uint32_t toks[2] = {UINT32_MAX, 0};
	kvi_encoder_begin(&enc, 1.0, 1, true, 3);
	kvi_encoder_stored(&enc, &h, 1, NULL, toks, 2, 2, "cpu_pinned", NULL);
	size_t len;
	const void *data = kvi_encoder_data(&enc, &len);
	kvi_batch b;
	assert_int_equal(kvi_decoder_decode(dec, data, len, &b), KVI_OK);
	assert_int_equal(b.dp_rank, 3);
	assert_true(b.events[0].tokens[0] == UINT32_MAX);
	assert_int_equal(b.events[0].tier, KVI_TIER_CPU);
	kvi_encoder_fini(&enc);

	/* [1, [["BlockStored", [1], nil, [4294967296, 1], 2, nil]]] */
	assert_string_equal(decode_skipped("920191"
					   "96ab426c6f636b53746f726564"
					   "9101c092cf000000010000000001"
					   "02c0",
					   KVI_SKIP_MALFORMED),
			    "events[0].token_ids[0]: 4294967296 is not a u32");
	/* token -5 */
	assert_string_equal(decode_skipped("920191"
					   "96ab426c6f636b53746f726564"
					   "9101c092fb01"
					   "02c0",
					   KVI_SKIP_MALFORMED),
			    "events[0].token_ids[0]: -5 is not a u32");
	/* block_size 0 with tokens */
	assert_string_equal(decode_skipped("920191"
					   "96ab426c6f636b53746f726564"
					   "9101c0920102"
					   "00c0",
					   KVI_SKIP_MALFORMED),
			    "events[0].block_size: 0 with 2 token ids");
	/* block_size 0 without tokens: an offload store */
	assert_int_equal(decode_hex("920191"
				    "96ab426c6f636b53746f726564"
				    "9101c090"
				    "00c0",
				    &b),
			 KVI_OK);
	assert_int_equal(b.events[0].type, KVI_EVENT_STORED);
	assert_int_equal(b.events[0].n_tokens, 0);
	assert_int_equal(b.events[0].block_size, 0);
	/* 4 fields only: too old to be a BlockStored */
	assert_non_null(strstr(decode_skipped("920191"
					      "95ab426c6f636b53746f726564"
					      "9101c092010202",
					      KVI_SKIP_MALFORMED),
			       "has 4 fields"));
}

static void
test_malformed_structure(void **state)
{
	(void)state;
	kvi_batch b;
	/* array32 declaring 2^32-1 elements in a 5-byte payload */
	assert_int_equal(decode_hex("ddffffffff", &b), KVI_EPROTO);
	assert_non_null(strstr(kvi_decoder_error(dec), "declares"));
	/* map32 declaring 2^31 pairs */
	assert_int_equal(decode_hex("df80000000", &b), KVI_EPROTO);
	/* str32 longer than the payload */
	assert_int_equal(decode_hex("db7fffffff41", &b), KVI_EPROTO);
	/* the never-used byte 0xc1 */
	assert_int_equal(decode_hex("c1", &b), KVI_EPROTO);
	/* trailing bytes after a complete batch */
	assert_int_equal(decode_hex("920190c0", &b), KVI_EPROTO);
	assert_non_null(strstr(kvi_decoder_error(dec), "trailing"));
	/* nesting 200 deep */
	uint8_t deep[200];
	memset(deep, 0x91, sizeof(deep));
	deep[199] = 0xc0;
	assert_int_equal(kvi_decoder_decode(dec, deep, sizeof(deep), &b),
			 KVI_EPROTO);
	assert_non_null(strstr(kvi_decoder_error(dec), "nested"));
	/* a batch that is a string, an empty batch, an unknown event */
	assert_int_equal(decode_hex("a3616263", &b), KVI_EPROTO);
	assert_int_equal(decode_hex("90", &b), KVI_EPROTO);
	assert_string_equal(
	    decode_skipped("92019191a3466f6f", KVI_SKIP_UNKNOWN_TYPE),
	    "events[0]: unknown event type \"Foo\"");
	/* a map event without "type", an empty event array */
	decode_skipped("92019181a178c0", KVI_SKIP_MALFORMED);
	decode_skipped("9201919"
		       "0",
		       KVI_SKIP_MALFORMED);
	/* map batch without events */
	assert_int_equal(decode_hex("81a27473cb3ff8000000000000", &b),
			 KVI_EPROTO);
	/* BlockRemoved map without block_hashes */
	assert_string_equal(
	    decode_skipped("92019181a474797065ac426c6f636b52656d6f"
			   "766564",
			   KVI_SKIP_MALFORMED),
	    "events[0]: missing block_hashes");
}

static void
test_decoder_reuse_keeps_no_state(void **state)
{
	(void)state;
	kvi_encoder enc;
	kvi_encoder_init(&enc, KVI_FORM_MAP, KVI_HASH_BIN32);
	uint64_t hashes[3] = {1, 2, UINT64_MAX};
	uint32_t toks[6] = {1, 2, 3, 4, 5, 6};
	uint64_t parent = 77;
	kvi_encoder_begin(&enc, 2.5, 3, true, -1);
	kvi_encoder_stored(&enc, hashes, 3, &parent, toks, 6, 2, "DISK",
			   "lora");
	kvi_encoder_removed(&enc, hashes + 2, 1, "CPU");
	kvi_encoder_cleared(&enc);
	size_t len;
	const void *data = kvi_encoder_data(&enc, &len);
	for (int round = 0; round < 3; round++) {
		kvi_batch b;
		assert_int_equal(kvi_decoder_decode(dec, data, len, &b),
				 KVI_OK);
		assert_true(b.ts == 2.5);
		assert_false(b.has_dp_rank);
		assert_int_equal(b.n_events, 3);
		assert_int_equal(b.events[0].n_hashes, 3);
		assert_true(b.events[0].hashes[2] == UINT64_MAX);
		assert_true(b.events[0].has_parent && b.events[0].parent == 77);
		assert_int_equal(b.events[0].tier, KVI_TIER_DISK);
		assert_int_equal(b.events[0].lora_name.len, 4);
		assert_int_equal(b.events[1].type, KVI_EVENT_REMOVED);
		assert_true(b.events[1].hashes[0] == UINT64_MAX);
		assert_int_equal(b.events[1].tier, KVI_TIER_CPU);
		assert_int_equal(b.events[2].type, KVI_EVENT_CLEARED);
		/* a failed decode in between leaves nothing behind */
		assert_int_not_equal(decode_hex("c1", &b), KVI_OK);
	}
	kvi_encoder_fini(&enc);
}

static void
test_medium_to_tier(void **state)
{
	(void)state;
	static const struct {
		const char *medium;
		kvi_tier tier;
	} table[] = {
	    {"GPU", KVI_TIER_GPU},       {"device", KVI_TIER_GPU},
	    {"CPU", KVI_TIER_CPU},       {"cpu_pinned", KVI_TIER_CPU},
	    {"CPU_TIER1", KVI_TIER_CPU}, {"CPU_TIER2", KVI_TIER_DISK},
	    {"DISK", KVI_TIER_DISK},     {"NVME", KVI_TIER_DISK},
	    {"STORAGE", KVI_TIER_DISK},  {"LMCACHE", KVI_TIER_DISK},
	    {"GPUX", KVI_TIER_DISK},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		assert_int_equal(kvi_tier_from_medium(table[i].medium,
						      strlen(table[i].medium)),
				 table[i].tier);
	}
	assert_int_equal(kvi_tier_from_medium(NULL, 0), KVI_TIER_GPU);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_prestate(test_vectors_decode_to_expect,
				      VLLM_VECTORS),
	    cmocka_unit_test_prestate(test_vectors_decode_to_expect,
				      ENGINE_VECTORS),
	    cmocka_unit_test_prestate(test_vectors_truncated_at_every_byte,
				      VLLM_VECTORS),
	    cmocka_unit_test_prestate(test_vectors_truncated_at_every_byte,
				      ENGINE_VECTORS),
	    cmocka_unit_test_prestate(test_vectors_wrong_type_in_each_field,
				      VLLM_VECTORS),
	    cmocka_unit_test_prestate(test_vectors_wrong_type_in_each_field,
				      ENGINE_VECTORS),
	    cmocka_unit_test(test_hash_forms),
	    cmocka_unit_test(test_rank_values),
	    cmocka_unit_test(test_token_ranges),
	    cmocka_unit_test(test_malformed_structure),
	    cmocka_unit_test(test_decoder_reuse_keeps_no_state),
	    cmocka_unit_test(test_medium_to_tier),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
