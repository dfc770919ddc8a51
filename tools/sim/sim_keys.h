/*
 * sim_keys.h - the extra keys of keyed requests in a batch.
 *
 * vLLM hashes a block over (parent, tokens, extra_keys), extra_keys being,
 * in this order: the LoRA name (every block of a LoRA request); every
 * multimodal item overlapping the block, as (identifier, item offset -
 * block start); the request's cache salt on the request's first block
 * only. A batch keeps each block's keys (sim_xkey records, strings in the
 * batch's text) so that events can name them, and so that the external
 * hash covers exactly them: sim_keys_bytes writes a block's keys in one
 * canonical byte encoding, which sim_external_hash_extra folds in.
 *
 * Items overlapping a block are found as hash.h's kvi_mm_block_items finds
 * them (vLLM's _gen_mm_extra_hash_keys): every item with offset < block end
 * and offset + length > block start, scanning from the first item the
 * previous block did not finish.
 *
 * Pure; a batch belongs to its caller.
 */
#ifndef KVI_SIM_KEYS_H
#define KVI_SIM_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "sim_cache.h"

/* sim_keys_empty returns true when k is NULL or has no LoRA name, salt or
 * item. */
bool sim_keys_empty(const kvi_prompt_keys *k);

/* sim_batch_add_keys copies the LoRA name and salt of k into batch and
 * returns the index of its sim_req_keys. */
uint32_t sim_batch_add_keys(sim_batch *batch, const kvi_prompt_keys *k);

/* sim_batch_block_keys appends the extra keys of block i of a request
 * (keys k, stored as batch->reqs[req]), which is the batch's block blk,
 * and ends blk's range in xkey_start. *next is the item scan position: 0
 * for block 0, then carried from block to block. Blocks must be added in
 * order. */
void sim_batch_block_keys(sim_batch *batch, uint32_t blk, uint32_t req,
			  const kvi_prompt_keys *k, uint32_t i, size_t *next);

/* sim_keys_bytes appends to x the canonical encoding of block k's extra
 * keys (nothing for a block without keys), in hash.h's record layout: a
 * string (LoRA name, salt) as a KVI_EXTRA_IDENT record, an item as a
 * KVI_EXTRA_MM record with its offset. */
void sim_keys_bytes(const sim_batch *batch, uint32_t k, kvi_xbuf *x);

/* sim_batch_str returns the NUL-terminated string at off of the batch's
 * text; valid until the batch grows or is reset. */
const char *sim_batch_str(const sim_batch *batch, uint32_t off);

#endif /* KVI_SIM_KEYS_H */
