/*
 * Unit tests of the simulator's KV cache groups on the wire: the events of
 * a hybrid rank's batch, read back by the indexer's decoder
 * (common/wire.h) and, for the fields it does not keep, as raw msgpack,
 * in the map, vllm and legacy forms.
 */
#include <msgpack.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "sim_encode.h"
#include "sim_groups_fixture.h"
#include "sim_recover.h"
#include "sim_ring.h"
#include "sim_sched.h"
#include "wire.h"

static const msgpack_object *
raw_event(const msgpack_object *root, uint32_t k)
{
	const msgpack_object *events = NULL;
	if (root->type == MSGPACK_OBJECT_MAP) {
		for (uint32_t i = 0; i < root->via.map.size; i++) {
			const msgpack_object_kv *kv = &root->via.map.ptr[i];
			if (kv->key.via.str.size == 6 &&
			    memcmp(kv->key.via.str.ptr, "events", 6) == 0) {
				events = &kv->val;
			}
		}
	} else {
		events = &root->via.array.ptr[1];
	}
	assert_non_null(events);
	assert_true(k < events->via.array.size);
	return &events->via.array.ptr[k];
}

/* key_at checks that map entry i of ev is key. */
static const msgpack_object *
key_at(const msgpack_object *ev, uint32_t i, const char *key)
{
	assert_int_equal(ev->type, MSGPACK_OBJECT_MAP);
	assert_true(i < ev->via.map.size);
	const msgpack_object *k = &ev->via.map.ptr[i].key;
	assert_int_equal(k->type, MSGPACK_OBJECT_STR);
	if (k->via.str.size != strlen(key) ||
	    memcmp(k->via.str.ptr, key, strlen(key)) != 0) {
		fail_msg("entry %u is \"%.*s\", not \"%s\"", i,
			 (int)k->via.str.size, k->via.str.ptr, key);
	}
	return &ev->via.map.ptr[i].val;
}

static void
assert_str(const msgpack_object *o, const char *s)
{
	assert_int_equal(o->type, MSGPACK_OBJECT_STR);
	assert_int_equal(o->via.str.size, strlen(s));
	assert_memory_equal(o->via.str.ptr, s, strlen(s));
}

/* encode encodes f's batch with enc (set up for a flavour) and dp_rank
 * 3, decodes it with the indexer's decoder into *kb and unpacks it into
 * *raw (destroyed by the caller). Both stay valid until enc's next
 * batch. */
static void
encode(gfx *f, kvi_encoder *enc, kvi_decoder *dec, kvi_batch *kb,
       msgpack_unpacked *raw)
{
	sim_encode_opts o = {.ts = 1.5,
			     .with_rank = true,
			     .dp_rank = 3,
			     .groups = sim_groups_cfg(f->g)};
	size_t len;
	const char *data = sim_encode_batch(&f->batch, &o, enc, &len);
	if (kvi_decoder_decode(dec, data, len, kb) != KVI_OK) {
		fail_msg("decode: %s", kvi_decoder_error(dec));
	}
	assert_int_equal(kb->n_skipped, 0);
	assert_true(kb->has_dp_rank);
	assert_int_equal(kb->dp_rank, 3);
	assert_int_equal(kb->n_events, f->batch.n_events);
	msgpack_unpacked_init(raw);
	size_t off = 0;
	assert_int_equal(msgpack_unpack_next(raw, data, len, &off),
			 MSGPACK_UNPACK_SUCCESS);
	assert_int_equal(off, len);
}

/* check_decoded compares the decoded events with the batch's. */
static void
check_decoded(const gfx *f, const kvi_batch *kb)
{
	for (uint32_t k = 0; k < kb->n_events; k++) {
		const sim_event *ev = &f->batch.events[k];
		const kvi_event *d = &kb->events[k];
		assert_true(d->has_group_idx);
		assert_int_equal(d->group_idx, ev->group);
		if (ev->type == SIM_EV_REMOVED) {
			assert_int_equal(d->type, KVI_EVENT_REMOVED);
			assert_memory_equal(d->hashes,
					    f->batch.removed + ev->first,
					    ev->n * sizeof(uint64_t));
			continue;
		}
		uint32_t stride = ev->stride > 1 ? ev->stride : 1;
		assert_int_equal(d->type, KVI_EVENT_STORED);
		assert_int_equal(d->n_hashes, ev->n);
		assert_int_equal(d->block_size, BS * stride);
		assert_int_equal(d->n_tokens, ev->n * stride * BS);
		assert_memory_equal(d->tokens,
				    f->batch.tokens + (size_t)ev->first * BS,
				    d->n_tokens * sizeof(uint32_t));
		for (uint32_t j = 0; j < ev->n; j++) {
			assert_true(d->hashes[j] == stored_hash(f, ev, j));
		}
		assert_int_equal(d->has_parent, ev->has_parent);
		assert_true(!ev->has_parent || d->parent == ev->parent);
	}
}

/* The fields a map event must have, in order, past its first 8 (type,
 * block_hashes, parent_block_hash, token_ids, block_size, lora_id,
 * medium, lora_name) or, for BlockRemoved, its first 3. */
static void
check_map(const msgpack_object *root, const char *const *kind,
	  const uint32_t *window)
{
	const char *names[] = {"group_idx", "kv_cache_spec_kind",
			       "kv_cache_spec_sliding_window"};
	for (uint32_t k = 0; k < 4; k++) {
		const msgpack_object *ev = raw_event(root, k);
		uint32_t at = kind[k] == NULL ? 3 : 8;
		uint32_t size = kind[k] == NULL ? 4 : window[k] ? 11 : 10;
		assert_int_equal(ev->via.map.size, size);
		assert_int_equal(key_at(ev, at, names[0])->via.u64,
				 k == 0 ? 1 : k - 1);
		if (kind[k] != NULL) {
			assert_str(key_at(ev, at + 1, names[1]), kind[k]);
		}
		if (kind[k] != NULL && window[k] > 0) {
			assert_int_equal(key_at(ev, at + 2, names[2])->via.u64,
					 window[k]);
		}
	}
}

/* check_legacy: the same as arrays, extra_keys nil before the group. */
static void
check_legacy(const msgpack_object *root, const char *const *kind,
	     const uint32_t *window)
{
	for (uint32_t k = 0; k < 4; k++) {
		const msgpack_object *ev = raw_event(root, k);
		assert_int_equal(ev->type, MSGPACK_OBJECT_ARRAY);
		const msgpack_object *a = ev->via.array.ptr;
		if (kind[k] == NULL) {
			assert_int_equal(ev->via.array.size, 4);
			assert_int_equal(a[3].via.u64, 1);
			continue;
		}
		assert_int_equal(ev->via.array.size, window[k] ? 12 : 11);
		assert_int_equal(a[8].type, MSGPACK_OBJECT_NIL);
		assert_int_equal(a[9].via.u64, k - 1);
		assert_str(&a[10], kind[k]);
		if (window[k] > 0) {
			assert_int_equal(a[11].via.u64, window[k]);
		}
	}
}

static void
test_wire(void **state)
{
	(void)state;
	gfx f;
	gfx_setup(&f, "full:4:16,swa=8:4:8,full:8:8");
	uint32_t a[25], b[17];
	ramp(a, 25, 100);
	ramp(b, 17, 900);
	run(&f, a, 25);
	run(&f, b, 17);
	/* BlockRemoved of group 1, then every group's BlockStored */
	assert_int_equal(f.batch.n_events, 4);
	event(&f, 0, SIM_EV_REMOVED, 1);
	assert_int_equal(event(&f, 3, SIM_EV_STORED, 2)->stride, 2);
	const char *kind[] = {NULL, "full_attention", "sliding_window",
			      "full_attention"};
	const uint32_t window[] = {0, 0, 8, 0};
	kvi_decoder *dec = kvi_decoder_alloc();
	kvi_batch kb;
	msgpack_unpacked raw;
	static const sim_flavour fls[] = {SIM_FLAVOUR_DEFAULT, SIM_FLAVOUR_VLLM,
					  SIM_FLAVOUR_VLLM_026,
					  SIM_FLAVOUR_LEGACY};
	for (size_t i = 0; i < 4; i++) {
		kvi_encoder enc;
		sim_flavour_encoder_init(&enc, fls[i], KVI_FORM_MAP,
					 KVI_HASH_UINT);
		encode(&f, &enc, dec, &kb, &raw);
		check_decoded(&f, &kb);
		if (fls[i] == SIM_FLAVOUR_LEGACY) {
			check_legacy(&raw.data, kind, window);
		} else {
			check_map(&raw.data, kind, window);
		}
		/* the vllm flavour's batch is a map, with its rank */
		assert_int_equal(raw.data.type, fls[i] == SIM_FLAVOUR_VLLM
						    ? MSGPACK_OBJECT_MAP
						    : MSGPACK_OBJECT_ARRAY);
		msgpack_unpacked_destroy(&raw);
		kvi_encoder_fini(&enc);
	}

	/* keys: extra_keys stays where vLLM puts it, before group_idx */
	kvi_prompt_keys keys = {.lora_name = "lora-a", .lora_len = 6};
	gfx k;
	gfx_setup(&k, "full:4:16,swa=8:4:8");
	sim_batch_reset(&k.batch);
	sim_groups_run(k.g, &k.batch, a, 25, &keys, &k.res);
	kvi_encoder enc;
	sim_flavour_encoder_init(&enc, SIM_FLAVOUR_VLLM, KVI_FORM_MAP,
				 KVI_HASH_UINT);
	encode(&k, &enc, dec, &kb, &raw);
	check_decoded(&k, &kb);
	assert_int_equal(kb.events[1].lora_name.len, 6);
	const msgpack_object *ev = raw_event(&raw.data, 1);
	assert_int_equal(key_at(ev, 8, "extra_keys")->type,
			 MSGPACK_OBJECT_ARRAY);
	assert_int_equal(key_at(ev, 9, "group_idx")->via.u64, 1);
	assert_str(key_at(ev, 10, "kv_cache_spec_kind"), "sliding_window");
	msgpack_unpacked_destroy(&raw);

	/* AllBlocksCleared is the model's, not a group's */
	sim_batch_reset(&k.batch);
	sim_groups_clear(k.g, &k.batch);
	assert_int_equal(sim_groups_count(k.g, 0) + sim_groups_count(k.g, 1),
			 0);
	sim_encode_opts o = {.with_rank = true, .groups = sim_groups_cfg(k.g)};
	size_t len;
	const void *data = sim_encode_batch(&k.batch, &o, &enc, &len);
	assert_int_equal(kvi_decoder_decode(dec, data, len, &kb), KVI_OK);
	assert_int_equal(kb.events[0].type, KVI_EVENT_CLEARED);
	assert_false(kb.events[0].has_group_idx);
	kvi_encoder_fini(&enc);
	gfx_fini(&k);
	kvi_decoder_free(dec);
	gfx_fini(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
