/*
 * Unit tests of the simulator's events on the wire (tools/sim/sim_encode.h):
 * every flavour's batches, keyed requests and their continuations, and
 * offload stores, read back by the indexer's own decoder (common/wire.h),
 * down to the local hashes an indexer derives from a store, which must be
 * the simulator's ground truth.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "hash.h"
#include "sim_cache.h"
#include "sim_encode.h"
#include "sim_fixture.h"
#include "sim_load.h"
#include "wire.h"
#include "wire_encode.h"

/* fx_run runs one request of n blocks of tokens (keys may be NULL) in a
 * fresh batch. */
static void
fx_run(fixture *f, const uint32_t *tok, size_t n, const kvi_prompt_keys *keys)
{
	sim_batch_reset(&f->batch);
	sim_cache_run_keyed(f->cache, &f->batch, tok, (uint32_t)n, keys,
			    &f->res);
}

/* ramp writes n blocks of tokens base, base + 1, ... */
static void
ramp(uint32_t *tok, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n * BS; i++) {
		tok[i] = base + (uint32_t)i;
	}
}

static const sim_event *
find_event(const sim_batch *b, sim_event_type type, unsigned tier)
{
	for (uint32_t i = 0; i < b->n_events; i++) {
		if (b->events[i].type == type && b->events[i].tier == tier) {
			return &b->events[i];
		}
	}
	return NULL;
}

/* The payload last decoded: a decoded batch's strings point into it. */
static void *payload;

/* decode_batch encodes f's batch in flavour fl and decodes it; the batch
 * is valid until the next call. */
static void
decode_batch(const fixture *f, sim_flavour fl, bool bs0, kvi_decoder *dec,
	     kvi_batch *out)
{
	kvi_encoder enc;
	sim_flavour_encoder_init(&enc, fl, KVI_FORM_MAP, KVI_HASH_UINT);
	sim_encode_opts o = {
	    .ts = 1.5, .with_rank = true, .dp_rank = 1, .offload_bs0 = bs0};
	size_t len;
	const void *data = sim_encode_batch(&f->batch, &o, &enc, &len);
	kvi_free(payload);
	payload = kvi_malloc(len);
	memcpy(payload, data, len);
	kvi_encoder_fini(&enc);
	kvi_err rv = kvi_decoder_decode(dec, payload, len, out);
	if (rv != KVI_OK) {
		fail_msg("%s: %s", sim_flavour_name(fl),
			 kvi_decoder_error(dec));
	}
	assert_int_equal(out->n_skipped, 0);
	assert_true(out->has_dp_rank && out->dp_rank == 1);
}

/* ---- every flavour, decoded ------------------------------------- */

/* derive_local returns the local hash an indexer derives for block i of a
 * decoded store: the LoRA in the seed, the salt too on the first block of
 * a sequence, the block's extra bytes after its tokens. */
static uint64_t
derive_local(const kvi_event *ev, uint32_t i)
{
	bool first = i == 0 && !ev->has_parent;
	uint64_t seed = kvi_local_seed(ev->lora_name.ptr, ev->lora_name.len,
				       first ? ev->cache_salt.ptr : NULL,
				       first ? ev->cache_salt.len : 0);
	const uint8_t *x = NULL;
	size_t xl = 0;
	if (ev->extra_off != NULL) {
		x = ev->extra + ev->extra_off[i];
		xl = ev->extra_off[i + 1] - ev->extra_off[i];
	}
	return kvi_local_hash_extra(ev->tokens + (size_t)i * BS, BS, seed, x,
				    xl);
}

/* check_decoded compares the decoded GPU store with the batch's. */
static void
check_decoded(const fixture *f, sim_flavour fl, const kvi_batch *kb,
	      const char *salt)
{
	const sim_event *ev =
	    find_event(&f->batch, SIM_EV_STORED, SIM_TIER_GPU);
	const kvi_event *d = NULL;
	for (uint32_t i = 0; i < kb->n_events; i++) {
		if (kb->events[i].type == KVI_EVENT_STORED &&
		    kb->events[i].tier == KVI_TIER_GPU) {
			d = &kb->events[i];
		}
	}
	assert_non_null(d);
	assert_int_equal(d->n_hashes, ev->n);
	assert_memory_equal(d->hashes, f->batch.ext + ev->first,
			    ev->n * sizeof(uint64_t));
	assert_int_equal(d->has_parent, ev->has_parent);
	assert_true(!ev->has_parent || d->parent == ev->parent);
	assert_int_equal(d->n_tokens, ev->n * BS);
	if (sim_flavour_sglang(fl)) {
		/* SGLang names the salt on every store of the request */
		assert_int_equal(d->cache_salt.len, strlen(salt));
		assert_null(d->lora_name.ptr);
	}
	for (uint32_t i = 0; i < ev->n; i++) {
		if (derive_local(d, i) != f->batch.local[ev->first + i]) {
			fail_msg("%s: block %u of the store derives another "
				 "local hash",
				 sim_flavour_name(fl), i);
		}
	}
}

static void
test_flavours_decode(void **state)
{
	(void)state;
	kvi_decoder *dec = kvi_decoder_alloc();
	uint32_t tok[6 * BS];
	ramp(tok, 6, 7000);
	kvi_mm_item mm[1] = {{"photo", 5, 3, 6}};
	for (int fl = 0; fl < SIM_FLAVOUR_COUNT; fl++) {
		bool sg = sim_flavour_sglang((sim_flavour)fl);
		kvi_prompt_keys k = {.cache_salt = "salt", .salt_len = 4};
		if (!sg) {
			k.lora_name = "lora-x";
			k.lora_len = 6;
			k.mm = mm;
			k.n_mm = 1;
		}
		fixture f;
		fx_setup(&f, 32, 32, true);
		kvi_batch kb;
		/* a salted first request, then its continuation */
		fx_run(&f, tok, 3, &k);
		decode_batch(&f, (sim_flavour)fl, true, dec, &kb);
		assert_int_equal(kb.n_events, 2);
		check_decoded(&f, (sim_flavour)fl, &kb, "salt");
		assert_false(kb.events[0].has_parent);
		if (!sg) {
			assert_int_equal(kb.events[0].lora_name.len, 6);
			assert_non_null(kb.events[0].extra_off);
		}
		fx_run(&f, tok, 6, &k);
		assert_int_equal(f.res.gpu_hit, 3);
		decode_batch(&f, (sim_flavour)fl, true, dec, &kb);
		check_decoded(&f, (sim_flavour)fl, &kb, "salt");
		assert_true(kb.events[0].has_parent);
		/* the offload names no keys at all */
		assert_int_equal(kb.events[1].n_tokens, 0);
		assert_null(kb.events[1].lora_name.ptr);
		assert_null(kb.events[1].cache_salt.ptr);
		assert_null(kb.events[1].extra_off);
		fx_fini(&f);
	}
	kvi_decoder_free(dec);
}

static void
test_offload_wire(void **state)
{
	(void)state;
	fixture f;
	fx_setup(&f, 4, 16, true);
	kvi_decoder *dec = kvi_decoder_alloc();
	kvi_batch kb;
	uint32_t a[4 * BS], b[4 * BS];
	ramp(a, 4, 10);
	ramp(b, 4, 90);
	fx_run(&f, a, 4, NULL);
	/* the GPU store with tokens, then the offload: the same hashes, no
	 * tokens, nil parent, block_size 0 */
	decode_batch(&f, SIM_FLAVOUR_VLLM, true, dec, &kb);
	assert_int_equal(kb.n_events, 2);
	assert_int_equal(kb.events[0].n_tokens, 4 * BS);
	assert_int_equal(kb.events[0].tier, KVI_TIER_GPU);
	const kvi_event *off = &kb.events[1];
	assert_int_equal(off->tier, KVI_TIER_CPU);
	assert_int_equal(off->n_tokens, 0);
	assert_false(off->has_parent);
	assert_int_equal(off->block_size, 0);
	assert_memory_equal(off->hashes, f.batch.ext, 4 * sizeof(uint64_t));
	/* without --offload-bs0 the real block size */
	decode_batch(&f, SIM_FLAVOUR_SGLANG, false, dec, &kb);
	assert_int_equal(kb.events[1].block_size, BS);
	assert_int_equal(kb.events[1].n_tokens, 0);
	/* a continuation's offload has a nil parent too */
	fx_run(&f, b, 2, NULL);
	uint32_t ab[6 * BS];
	memcpy(ab, b, sizeof(b));
	ramp(ab + 4 * BS, 2, 300);
	fx_run(&f, ab, 4, NULL);
	assert_int_equal(f.res.gpu_hit, 2);
	decode_batch(&f, SIM_FLAVOUR_LEGACY, true, dec, &kb);
	const kvi_event *last = &kb.events[kb.n_events - 1];
	assert_int_equal(last->tier, KVI_TIER_CPU);
	assert_false(last->has_parent);
	assert_true(kb.events[kb.n_events - 2].has_parent);
	/* GPU evictions and CPU evictions name their medium */
	bool gpu_rm = false;
	for (uint32_t i = 0; i < kb.n_events; i++) {
		gpu_rm |= kb.events[i].type == KVI_EVENT_REMOVED &&
			  kb.events[i].tier == KVI_TIER_GPU;
	}
	assert_true(gpu_rm);
	kvi_decoder_free(dec);
	fx_fini(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_flavours_decode),
	    cmocka_unit_test(test_offload_wire),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	kvi_free(payload);
	return rc;
}
