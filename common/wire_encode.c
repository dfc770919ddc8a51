#include "wire_encode.h"

#include <stdint.h>
#include <string.h>

#include "alloc.h"

/* msgpack_sbuffer grows with realloc(); a failed write can only mean memory
 * exhaustion, which kvindex treats as fatal everywhere. */
static void
kvi_encoder_check(int rc)
{
	if (rc != 0) {
		kvi_oom(0);
	}
}

#define PK(call) kvi_encoder_check(call)

void
kvi_encoder_init(kvi_encoder *enc, kvi_event_form form, kvi_hash_form hash_form)
{
	memset(enc, 0, sizeof(*enc));
	msgpack_sbuffer_init(&enc->buf);
	msgpack_packer_init(&enc->pk, &enc->buf, msgpack_sbuffer_write);
	enc->form = form;
	enc->hash_form = hash_form;
}

void
kvi_encoder_fini(kvi_encoder *enc)
{
	msgpack_sbuffer_destroy(&enc->buf);
	memset(enc, 0, sizeof(*enc));
}

static void kvi_pack_str(msgpack_packer *pk, const char *s);

/* The rank trails the events: it is written once the last announced event
 * has been. */
static void
kvi_encoder_event_done(kvi_encoder *enc)
{
	if (enc->left > 0 && --enc->left == 0 && enc->with_rank) {
		if (enc->map_batch) {
			if (enc->dp_rank >= 0) {
				kvi_pack_str(&enc->pk, "data_parallel_rank");
				PK(msgpack_pack_int(&enc->pk, enc->dp_rank));
			}
			return;
		}
		if (enc->dp_rank < 0) {
			PK(msgpack_pack_nil(&enc->pk));
		} else {
			PK(msgpack_pack_int(&enc->pk, enc->dp_rank));
		}
	}
}

void
kvi_encoder_begin(kvi_encoder *enc, double ts, uint32_t n_events,
		  bool with_rank, int dp_rank)
{
	msgpack_sbuffer_clear(&enc->buf);
	enc->with_rank = with_rank;
	enc->dp_rank = dp_rank;
	enc->left = n_events + 1;
	if (enc->map_batch) {
		bool rank = with_rank && dp_rank >= 0;
		PK(msgpack_pack_map(&enc->pk, rank ? 3 : 2));
		kvi_pack_str(&enc->pk, "ts");
		PK(msgpack_pack_double(&enc->pk, ts));
		kvi_pack_str(&enc->pk, "events");
	} else {
		PK(msgpack_pack_array(&enc->pk, with_rank ? 3 : 2));
		PK(msgpack_pack_double(&enc->pk, ts));
	}
	PK(msgpack_pack_array(&enc->pk, n_events));
	kvi_encoder_event_done(enc); /* writes the rank now if n_events is 0 */
}

static void
kvi_pack_str(msgpack_packer *pk, const char *s)
{
	if (s == NULL) {
		PK(msgpack_pack_nil(pk));
		return;
	}
	size_t n = strlen(s);
	PK(msgpack_pack_str(pk, n));
	PK(msgpack_pack_str_body(pk, s, n));
}

static void
kvi_pack_hash(kvi_encoder *enc, uint64_t h)
{
	switch (enc->hash_form) {
	case KVI_HASH_INT64:
		PK(msgpack_pack_int64(&enc->pk, (int64_t)h));
		break;
	case KVI_HASH_BIN32: {
		uint8_t b[32] = {0};
		for (int i = 0; i < 8; i++) {
			b[24 + i] = (uint8_t)(h >> (56 - 8 * i));
		}
		PK(msgpack_pack_bin(&enc->pk, sizeof(b)));
		PK(msgpack_pack_bin_body(&enc->pk, b, sizeof(b)));
		break;
	}
	default:
		PK(msgpack_pack_uint64(&enc->pk, h));
		break;
	}
}

static void
kvi_pack_hashes(kvi_encoder *enc, const uint64_t *hashes, size_t n)
{
	PK(msgpack_pack_array(&enc->pk, n));
	for (size_t i = 0; i < n; i++) {
		kvi_pack_hash(enc, hashes[i]);
	}
}

static bool
kvi_form_is_map(kvi_event_form form)
{
	return form == KVI_FORM_MAP || form == KVI_FORM_SGLANG_MAP;
}

/* kvi_pack_tag starts an event: a map of n_fields + 1 entries whose first
 * is "type", or an array whose first element is the tag. */
static void
kvi_pack_tag(kvi_encoder *enc, const char *tag, size_t n_fields)
{
	if (kvi_form_is_map(enc->form)) {
		PK(msgpack_pack_map(&enc->pk, n_fields + 1));
		kvi_pack_str(&enc->pk, "type");
	} else {
		PK(msgpack_pack_array(&enc->pk, n_fields + 1));
	}
	kvi_pack_str(&enc->pk, tag);
}

static void
kvi_pack_key(kvi_encoder *enc, const char *key)
{
	if (kvi_form_is_map(enc->form)) {
		kvi_pack_str(&enc->pk, key);
	}
}

static void
kvi_pack_xkeys(kvi_encoder *enc, const kvi_stored_spec *s)
{
	msgpack_packer *pk = &enc->pk;
	PK(msgpack_pack_array(pk, s->n));
	for (size_t i = 0; i < s->n; i++) {
		uint32_t a = s->xkey_start[i], b = s->xkey_start[i + 1];
		if (a == b) {
			PK(msgpack_pack_nil(pk));
			continue;
		}
		PK(msgpack_pack_array(pk, b - a));
		for (uint32_t k = a; k < b; k++) {
			const kvi_xkey *x = &s->xkeys[k];
			switch (x->kind) {
			case KVI_XKEY_MM:
				PK(msgpack_pack_array(pk, 2));
				PK(msgpack_pack_str(pk, x->len));
				PK(msgpack_pack_str_body(pk, x->p, x->len));
				PK(msgpack_pack_int64(pk, x->offset));
				break;
			case KVI_XKEY_BIN:
				PK(msgpack_pack_bin(pk, x->len));
				PK(msgpack_pack_bin_body(pk, x->p, x->len));
				break;
			default:
				PK(msgpack_pack_str(pk, x->len));
				PK(msgpack_pack_str_body(pk, x->p, x->len));
				break;
			}
		}
	}
}

/* The fields of a BlockStored in each form: the vLLM forms write
 * lora_name and, when given, extra_keys; SGLang's write the salt. */
static size_t
kvi_stored_fields(const kvi_encoder *enc, const kvi_stored_spec *s)
{
	if (enc->form == KVI_FORM_SGLANG || enc->form == KVI_FORM_SGLANG_MAP) {
		return s->cache_salt != NULL ? 7 : 6;
	}
	return s->xkey_start != NULL ? 8 : 7;
}

void
kvi_encoder_stored_spec(kvi_encoder *enc, const kvi_stored_spec *s)
{
	msgpack_packer *pk = &enc->pk;
	bool sglang =
	    enc->form == KVI_FORM_SGLANG || enc->form == KVI_FORM_SGLANG_MAP;
	kvi_pack_tag(enc, "BlockStored", kvi_stored_fields(enc, s));
	kvi_pack_key(enc, "block_hashes");
	kvi_pack_hashes(enc, s->hashes, s->n);
	kvi_pack_key(enc, "parent_block_hash");
	if (s->parent != NULL) {
		kvi_pack_hash(enc, *s->parent);
	} else {
		PK(msgpack_pack_nil(pk));
	}
	kvi_pack_key(enc, "token_ids");
	PK(msgpack_pack_array(pk, s->n_tokens));
	for (size_t i = 0; i < s->n_tokens; i++) {
		PK(msgpack_pack_uint32(pk, s->tokens[i]));
	}
	kvi_pack_key(enc, "block_size");
	PK(msgpack_pack_uint32(pk, s->block_size));
	kvi_pack_key(enc, "lora_id");
	PK(msgpack_pack_nil(pk));
	kvi_pack_key(enc, "medium");
	kvi_pack_str(pk, s->medium);
	if (sglang) {
		if (s->cache_salt == NULL) {
			/* nothing */
		} else if (enc->form == KVI_FORM_SGLANG) {
			PK(msgpack_pack_map(pk, 1));
			kvi_pack_str(pk, "cache_salt");
			kvi_pack_str(pk, s->cache_salt);
		} else {
			kvi_pack_key(enc, "cache_salt");
			kvi_pack_str(pk, s->cache_salt);
		}
	} else {
		kvi_pack_key(enc, "lora_name");
		kvi_pack_str(pk, s->lora_name);
		if (s->xkey_start != NULL) {
			kvi_pack_key(enc, "extra_keys");
			kvi_pack_xkeys(enc, s);
		}
	}
	kvi_encoder_event_done(enc);
}

void
kvi_encoder_stored(kvi_encoder *enc, const uint64_t *hashes, size_t n,
		   const uint64_t *parent, const uint32_t *tokens,
		   size_t n_tokens, uint32_t block_size, const char *medium,
		   const char *lora_name)
{
	kvi_stored_spec s = {.hashes = hashes,
			     .n = n,
			     .parent = parent,
			     .tokens = tokens,
			     .n_tokens = n_tokens,
			     .block_size = block_size,
			     .medium = medium,
			     .lora_name = lora_name};
	kvi_encoder_stored_spec(enc, &s);
}

void
kvi_encoder_removed(kvi_encoder *enc, const uint64_t *hashes, size_t n,
		    const char *medium)
{
	kvi_pack_tag(enc, "BlockRemoved", 2);
	kvi_pack_key(enc, "block_hashes");
	kvi_pack_hashes(enc, hashes, n);
	kvi_pack_key(enc, "medium");
	kvi_pack_str(&enc->pk, medium);
	kvi_encoder_event_done(enc);
}

void
kvi_encoder_cleared(kvi_encoder *enc)
{
	kvi_pack_tag(enc, "AllBlocksCleared", 0);
	kvi_encoder_event_done(enc);
}

const void *
kvi_encoder_data(const kvi_encoder *enc, size_t *len)
{
	*len = enc->buf.size;
	return enc->buf.data;
}
