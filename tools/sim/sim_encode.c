#include "sim_encode.h"

#include <string.h>

#include "alloc.h"
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

static void
encode_stored(const sim_batch *b, const sim_event *ev, const kvi_xkey *xkeys,
	      const sim_encode_opts *o, kvi_encoder *enc)
{
	uint32_t bs = b->block_size;
	kvi_stored_spec s = {
	    .hashes = b->ext + ev->first,
	    .n = ev->n,
	    .block_size = ev->offload && o->offload_bs0 ? 0 : bs,
	    .medium = ev->tier == SIM_TIER_CPU ? "CPU" : "GPU",
	};
	if (!ev->offload) {
		s.parent = ev->has_parent ? &ev->parent : NULL;
		s.tokens = b->tokens + (size_t)ev->first * bs;
		s.n_tokens = (size_t)ev->n * bs;
	}
	if (!ev->offload && ev->req != SIM_NO_KEYS) {
		const sim_req_keys *r = &b->reqs[ev->req];
		if (form_is_sglang(enc->form)) {
			if (r->salt_len > 0) {
				s.cache_salt = sim_batch_str(b, r->salt_off);
			}
		} else {
			if (r->lora_len > 0) {
				s.lora_name = sim_batch_str(b, r->lora_off);
			}
			s.xkeys = xkeys;
			s.xkey_start = b->xkey_start + ev->first;
		}
	}
	kvi_encoder_stored_spec(enc, &s);
}

const void *
sim_encode_batch(const sim_batch *b, const sim_encode_opts *o, kvi_encoder *enc,
		 size_t *len)
{
	kvi_xkey *xkeys = wire_xkeys(b);
	kvi_encoder_begin(enc, o->ts, b->n_events, o->with_rank, o->dp_rank);
	for (uint32_t i = 0; i < b->n_events; i++) {
		const sim_event *ev = &b->events[i];
		if (ev->type == SIM_EV_STORED) {
			encode_stored(b, ev, xkeys, o, enc);
		} else if (ev->type == SIM_EV_REMOVED) {
			kvi_encoder_removed(enc, b->removed + ev->first, ev->n,
					    ev->tier == SIM_TIER_CPU ? "CPU"
								     : "GPU");
		} else {
			kvi_encoder_cleared(enc);
		}
	}
	kvi_free(xkeys);
	return kvi_encoder_data(enc, len);
}
