#include "sim_encode.h"

#include <string.h>

#include "alloc.h"
#include "sim_groups.h"
#include "sim_keys.h"

static const struct {
	const char *name;
	kvi_event_form form;
	kvi_hash_form hash_form;
	bool map_batch;
} flavours[SIM_FLAVOUR_COUNT] = {
    [SIM_FLAVOUR_DEFAULT] = {"default", KVI_FORM_MAP, KVI_HASH_UINT, false},
    [SIM_FLAVOUR_VLLM] = {"vllm", KVI_FORM_MAP, KVI_HASH_UINT, true},
    [SIM_FLAVOUR_VLLM_026] = {"vllm-0.26", KVI_FORM_MAP, KVI_HASH_UINT, false},
    [SIM_FLAVOUR_SGLANG] = {"sglang", KVI_FORM_SGLANG, KVI_HASH_INT64, false},
    [SIM_FLAVOUR_SGLANG_MAP] = {"sglang-map", KVI_FORM_SGLANG_MAP,
				KVI_HASH_INT64, false},
    [SIM_FLAVOUR_LEGACY] = {"legacy", KVI_FORM_LEGACY, KVI_HASH_UINT, false},
};

bool
sim_flavour_parse(const char *s, size_t len, sim_flavour *out)
{
	for (int f = SIM_FLAVOUR_VLLM; f < SIM_FLAVOUR_COUNT; f++) {
		if (strlen(flavours[f].name) == len &&
		    memcmp(flavours[f].name, s, len) == 0) {
			*out = (sim_flavour)f;
			return true;
		}
	}
	return false;
}

const char *
sim_flavour_name(sim_flavour f)
{
	return (unsigned)f < SIM_FLAVOUR_COUNT ? flavours[f].name : "?";
}

bool
sim_flavour_sglang(sim_flavour f)
{
	return f == SIM_FLAVOUR_SGLANG || f == SIM_FLAVOUR_SGLANG_MAP;
}

void
sim_flavour_encoder_init(kvi_encoder *enc, sim_flavour f, kvi_event_form form,
			 kvi_hash_form hash_form)
{
	if (f == SIM_FLAVOUR_DEFAULT) {
		kvi_encoder_init(enc, form, hash_form);
		return;
	}
	kvi_encoder_init(enc, flavours[f].form, flavours[f].hash_form);
	enc->map_batch = flavours[f].map_batch;
}

static bool
form_is_sglang(kvi_event_form form)
{
	return form == KVI_FORM_SGLANG || form == KVI_FORM_SGLANG_MAP;
}

/* wire_xkeys returns the batch's extra keys as the encoder takes them, in a
 * new array (kvi_free), or NULL when there are none. */
static kvi_xkey *
wire_xkeys(const sim_batch *b)
{
	if (b->n_xkeys == 0) {
		return NULL;
	}
	kvi_xkey *x = kvi_malloc(b->n_xkeys * sizeof(*x));
	for (uint32_t i = 0; i < b->n_xkeys; i++) {
		const sim_xkey *k = &b->xkeys[i];
		x[i] = (kvi_xkey){.kind = (kvi_xkey_kind)k->kind,
				  .p = sim_batch_str(b, k->off),
				  .len = k->len,
				  .offset = k->offset};
	}
	return x;
}

/* stored_spec fills s for a stored event; hashes is scratch for the
 * hashes of a group's blocks when they span several batch blocks. */
static void
stored_spec(const sim_batch *b, const sim_event *ev, const kvi_xkey *xkeys,
	    const sim_encode_opts *o, const kvi_encoder *enc, uint64_t *hashes,
	    kvi_stored_spec *s)
{
	uint32_t bs = b->block_size;
	uint32_t stride = ev->stride > 1 ? ev->stride : 1;
	memset(s, 0, sizeof(*s));
	s->hashes = b->ext + ev->first;
	s->n = ev->n;
	s->block_size = ev->offload && o->offload_bs0 ? 0 : bs * stride;
	s->medium = ev->tier == SIM_TIER_CPU ? "CPU" : "GPU";
	if (stride > 1) {
		for (uint32_t k = 0; k < ev->n; k++) {
			hashes[k] = b->ext[ev->first + (k + 1) * stride - 1];
		}
		s->hashes = hashes;
	}
	if (!ev->offload) {
		s->parent = ev->has_parent ? &ev->parent : NULL;
		s->tokens = b->tokens + (size_t)ev->first * bs;
		s->n_tokens = (size_t)ev->n * stride * bs;
	}
	if (!ev->offload && ev->req != SIM_NO_KEYS) {
		const sim_req_keys *r = &b->reqs[ev->req];
		if (form_is_sglang(enc->form)) {
			if (r->salt_len > 0) {
				s->cache_salt = sim_batch_str(b, r->salt_off);
			}
		} else {
			if (r->lora_len > 0) {
				s->lora_name = sim_batch_str(b, r->lora_off);
			}
			s->xkeys = xkeys;
			s->xkey_start = b->xkey_start + ev->first;
		}
	}
}

static void
pk_check(int rc)
{
	if (rc != 0) {
		kvi_oom(0);
	}
}

static void
pack_str(msgpack_packer *pk, const char *str)
{
	size_t n = strlen(str);
	pk_check(msgpack_pack_str(pk, n));
	pk_check(msgpack_pack_str_body(pk, str, n));
}

/* A grouped event is written by the common encoder into a scratch
 * encoder, then copied into the batch with its group fields appended, in
 * the order and under the names of vLLM's msgspec structs
 * (vllm/distributed/kv_events.py BlockStored: ..., extra_keys, group_idx,
 * kv_cache_spec_kind, kv_cache_spec_sliding_window; BlockRemoved:
 * block_hashes, medium, group_idx), which omit None defaults: a map leaves
 * them out, a legacy array only when they trail (extra_keys is nil there
 * when a group field follows). The event's fixmap or fixarray header grows
 * by the fields added. */
static void
group_fields(const sim_event *ev, const sim_group_spec *spec,
	     const kvi_stored_spec *s, bool map, msgpack_packer *pk,
	     unsigned *added)
{
	bool stored = ev->type == SIM_EV_STORED;
	uint32_t window = stored && spec != NULL ? sim_group_window(spec) : 0;
	if (stored && !map && s->xkey_start == NULL) {
		pk_check(msgpack_pack_nil(pk)); /* extra_keys */
		(*added)++;
	}
	if (map) {
		pack_str(pk, "group_idx");
	}
	pk_check(msgpack_pack_uint32(pk, ev->group));
	(*added)++;
	if (!stored || spec == NULL) {
		return;
	}
	if (map) {
		pack_str(pk, "kv_cache_spec_kind");
	}
	pack_str(pk, sim_group_kind_name(spec->kind));
	(*added)++;
	if (window > 0) {
		if (map) {
			pack_str(pk, "kv_cache_spec_sliding_window");
		}
		pk_check(msgpack_pack_uint32(pk, window));
		(*added)++;
	}
}

/* encode_grouped writes one grouped event into enc's buffer. */
static void
encode_grouped(const sim_batch *b, const sim_event *ev, const kvi_xkey *xkeys,
	       const sim_encode_opts *o, kvi_encoder *enc, uint64_t *hashes)
{
	kvi_encoder sc;
	kvi_encoder_init(&sc, enc->form, enc->hash_form);
	kvi_encoder_begin(&sc, 0, 1, false, -1);
	size_t off = sc.buf.size;
	kvi_stored_spec s;
	if (ev->type == SIM_EV_STORED) {
		stored_spec(b, ev, xkeys, o, enc, hashes, &s);
		kvi_encoder_stored_spec(&sc, &s);
	} else {
		memset(&s, 0, sizeof(s));
		kvi_encoder_removed(&sc, b->removed + ev->first, ev->n,
				    ev->tier == SIM_TIER_CPU ? "CPU" : "GPU");
	}
	const sim_group_spec *spec =
	    o->groups != NULL && ev->group < o->groups->n_groups
		? &o->groups->groups[ev->group].spec
		: NULL;
	bool map = enc->form == KVI_FORM_MAP;
	unsigned added = 0;
	group_fields(ev, spec, &s, map, &sc.pk, &added);
	uint8_t *p = (uint8_t *)sc.buf.data + off;
	/* fixmap 0x80|n or fixarray 0x90|n, n <= 12 with what is added */
	p[0] = (uint8_t)(p[0] + added);
	pk_check(msgpack_sbuffer_write(&enc->buf, (const char *)p,
				       sc.buf.size - off));
	kvi_encoder_fini(&sc);
}

/* rank_trailer ends a batch whose events were not all written by the
 * common encoder: as kvi_encoder_event_done does after the last one, the
 * data_parallel_rank follows the events. */
static void
rank_trailer(kvi_encoder *enc)
{
	if (enc->left == 0 || --enc->left > 0 || !enc->with_rank) {
		return;
	}
	if (enc->map_batch) {
		if (enc->dp_rank >= 0) {
			pack_str(&enc->pk, "data_parallel_rank");
			pk_check(msgpack_pack_int(&enc->pk, enc->dp_rank));
		}
		return;
	}
	if (enc->dp_rank < 0) {
		pk_check(msgpack_pack_nil(&enc->pk));
	} else {
		pk_check(msgpack_pack_int(&enc->pk, enc->dp_rank));
	}
}

const void *
sim_encode_batch(const sim_batch *b, const sim_encode_opts *o, kvi_encoder *enc,
		 size_t *len)
{
	kvi_xkey *xkeys = wire_xkeys(b);
	uint64_t *hashes = NULL;
	kvi_encoder_begin(enc, o->ts, b->n_events, o->with_rank, o->dp_rank);
	for (uint32_t i = 0; i < b->n_events; i++) {
		const sim_event *ev = &b->events[i];
		if (ev->grouped && ev->type != SIM_EV_CLEARED) {
			if (hashes == NULL) {
				hashes = kvi_malloc(((size_t)b->n_blocks + 1) *
						    sizeof(uint64_t));
			}
			encode_grouped(b, ev, xkeys, o, enc, hashes);
			rank_trailer(enc);
		} else if (ev->type == SIM_EV_STORED) {
			kvi_stored_spec s;
			stored_spec(b, ev, xkeys, o, enc, NULL, &s);
			kvi_encoder_stored_spec(enc, &s);
		} else if (ev->type == SIM_EV_REMOVED) {
			kvi_encoder_removed(enc, b->removed + ev->first, ev->n,
					    ev->tier == SIM_TIER_CPU ? "CPU"
								     : "GPU");
		} else {
			kvi_encoder_cleared(enc);
		}
	}
	kvi_free(hashes);
	kvi_free(xkeys);
	return kvi_encoder_data(enc, len);
}
