/*
 * sim_encode.h - engine flavours and the encoding of a rank's batch.
 *
 * A flavour is the shape in which one kind of engine publishes its events
 * (docs/wire.md#shapes-by-engine):
 *
 *   vllm        current vLLM: the batch a map {ts, events,
 *               data_parallel_rank}, tagged-map events, uint hashes;
 *   vllm-0.26   an array batch [ts, events, rank] of tagged-map events;
 *   sglang      an array batch of SGLang's positional events, int64
 *               hashes, a {"cache_salt": ...} metadata map at index 7 on
 *               the stores of a salted request;
 *   sglang-map  the same with SGLang's tagged maps (cache_salt a field);
 *   legacy      an array batch of legacy tagged arrays, uint hashes.
 *
 * SIM_FLAVOUR_DEFAULT is what --form and --hash-format say (an array batch
 * either way), which is the simulator's shape when no flavour is asked
 * for.
 *
 * Stores of the vLLM flavours (default, vllm, vllm-0.26, legacy) carry
 * the request's lora_name and, when the request has keys, extra_keys:
 * per block nil or the block's keys (sim_keys.h). SGLang flavours carry
 * neither, only the salt. An offload store (sim_cache.h) carries no
 * tokens, a nil parent, block_size 0 with offload_bs0 (else the real one),
 * and no keys at all: it names blocks the rank has just stored on GPU.
 *
 * An event of a KV cache group (sim_event.grouped, sim_groups.h) carries
 * group_idx, and a store also kv_cache_spec_kind and, for a sliding
 * window, kv_cache_spec_sliding_window, as vLLM's msgspec structs lay them
 * out (vllm/distributed/kv_events.py): after extra_keys, None omitted. A
 * group of block size r * the batch's stores r batch blocks per block:
 * its blocks' hashes are each one's last, its tokens all of them. Only
 * the vLLM forms (map, legacy) can carry group fields.
 *
 * Pure: sim_encode_batch writes into the caller's encoder.
 */
#ifndef KVI_SIM_ENCODE_H
#define KVI_SIM_ENCODE_H

#include <stdbool.h>
#include <stddef.h>

#include "sim_cache.h"
#include "wire_encode.h"

typedef enum sim_flavour {
	SIM_FLAVOUR_DEFAULT = 0,
	SIM_FLAVOUR_VLLM,
	SIM_FLAVOUR_VLLM_026,
	SIM_FLAVOUR_SGLANG,
	SIM_FLAVOUR_SGLANG_MAP,
	SIM_FLAVOUR_LEGACY,
} sim_flavour;
#define SIM_FLAVOUR_COUNT 6

/* sim_flavour_parse maps "vllm", "vllm-0.26", "sglang", "sglang-map",
 * "legacy" to a flavour; returns false for anything else. */
bool sim_flavour_parse(const char *s, size_t len, sim_flavour *out);

/* sim_flavour_name returns the flavour's name ("default" for the
 * default). */
const char *sim_flavour_name(sim_flavour f);

/* sim_flavour_sglang returns true for the SGLang flavours, whose events
 * cannot name a LoRA or multimodal items. */
bool sim_flavour_sglang(sim_flavour f);

/* sim_flavour_encoder_init initialises enc for flavour f; the default
 * flavour takes form and hash_form. */
void sim_flavour_encoder_init(kvi_encoder *enc, sim_flavour f,
			      kvi_event_form form, kvi_hash_form hash_form);

struct sim_groups_config;

typedef struct sim_encode_opts {
	double ts;
	bool with_rank;
	int dp_rank;
	bool offload_bs0; /* offload stores say block_size 0 */
	/* the rank's KV cache groups, for the spec of grouped stores;
	 * NULL: none */
	const struct sim_groups_config *groups;
} sim_encode_opts;

/* sim_encode_batch encodes every event of batch with enc and returns the
 * payload (valid until enc's next batch) and its length in *len. */
const void *sim_encode_batch(const sim_batch *batch, const sim_encode_opts *o,
			     kvi_encoder *enc, size_t *len);

#endif /* KVI_SIM_ENCODE_H */
