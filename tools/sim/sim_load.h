/*
 * sim_load.h - the prompts a simulated fleet serves.
 *
 * Prompts are sequences of block ids, expanded into tokens: one id stands
 * for blocks_per_id blocks of block_size tokens, and block j of id i holds
 * pseudo-random tokens (< 152000) drawn from a generator seeded by (i, j)
 * alone, so equal ids are equal prefixes on every rank and in every run.
 *
 * Two sources:
 *   trace     a Mooncake jsonl trace (each line's "hash_ids"); with copies
 *             C every line is served C times with disjoint id ranges
 *             (request r is line r / C, copy r % C);
 *   generate  N synthetic prompts: a few shared system prompts with random
 *             suffixes, and follow-up turns that extend a recent prompt.
 * A pass is the whole trace times its copies, or the N prompts; the load
 * stops after one pass, or after `requests`, or never with `loop` (every
 * pass repeats the first one exactly).
 *
 * Parsing is separate from reading (sim_trace_parse_line). A sim_load is
 * used by one thread.
 */
#ifndef KVI_SIM_LOAD_H
#define KVI_SIM_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "hash.h"

/* Tokens are drawn below this bound (a typical vocabulary size). */
#define SIM_VOCAB 152000u

/* The token of an image's placeholder run (Qwen2-VL's image pad). */
#define SIM_PLACEHOLDER 151655u

typedef struct sim_load_config {
	const char *trace_path; /* NULL: generate */
	uint32_t generate;      /* synthetic prompts per pass */
	uint32_t copies;        /* >= 1 */
	uint32_t blocks_per_id; /* >= 1 */
	uint32_t block_size;    /* >= 1 */
	uint64_t requests;      /* 0: one pass (or forever with loop) */
	uint32_t salts;         /* keys (sim_load_next_keyed), 0: none */
	uint32_t loras;
	uint32_t mm_every;
	bool loop;
	uint64_t seed;
} sim_load_config;

typedef struct sim_load sim_load;

/* sim_load_open reads the trace (if any) and returns a load positioned at
 * its first request. Returns KVI_ENOENT or KVI_EIO for an unreadable file,
 * KVI_EPROTO for a malformed line, KVI_EINVAL for an empty source; err
 * (errlen bytes) then says what. */
kvi_err sim_load_open(const sim_load_config *cfg, sim_load **out, char *err,
		      size_t errlen);
void sim_load_free(sim_load *l);

/* sim_load_next returns the tokens of the next request (valid until the
 * next call) and its number of blocks, or false when the load is done. */
bool sim_load_next(sim_load *l, const uint32_t **tokens, uint32_t *n_blocks);

/* sim_load_next_keyed is sim_load_next that also returns the request's
 * keys in *keys (valid until the next call; NULL when it has none). A
 * prompt's salt and LoRA name are drawn from its tenant: a trace line's
 * first id, a generated conversation's own draw (kept by its follow-ups);
 * with salts N, one of "salt-1" .. "salt-N" or none, and likewise
 * "lora-1" .. "lora-N"; with mm_every N, a prompt whose second id hashes to 0
 * mod N carries an image from that id's first token on: 3 to 40 blocks' worth
 * of SIM_PLACEHOLDER tokens less half a block, its identifier and length
 * drawn from that id, when it fits in the prompt. Equal prefixes thus keep
 * equal keys, and follow-up turns hit their earlier turns. */
bool sim_load_next_keyed(sim_load *l, const uint32_t **tokens,
			 uint32_t *n_blocks, const kvi_prompt_keys **keys);

/* sim_load_total returns the number of requests the load serves, or
 * UINT64_MAX when it loops forever. */
uint64_t sim_load_total(const sim_load *l);

/* sim_load_block_tokens writes the bs tokens of block j of id into out. */
void sim_load_block_tokens(uint64_t id, uint32_t j, uint32_t bs, uint32_t *out);

/* sim_load_expand expands n ids into *n_blocks blocks of tokens in a new
 * array (kvi_free). */
uint32_t *sim_load_expand(const uint64_t *ids, size_t n, uint32_t blocks_per_id,
			  uint32_t bs, uint32_t *n_blocks);

/* sim_trace_parse_line parses one trace line of len bytes and writes its
 * hash ids into a new array *ids (kvi_free) of *n entries. Returns
 * KVI_EPROTO when the line is not an object with an array of non-negative
 * integers "hash_ids". */
kvi_err sim_trace_parse_line(const char *line, size_t len, uint64_t **ids,
			     size_t *n);

#endif /* KVI_SIM_LOAD_H */
