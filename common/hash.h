/*
 * hash.h - local block hashes and the sequence-hash chain.
 *
 * Local hash (docs/wire.md#local-block-hash). The hash of one block of tokens,
 * identical to the standalone KV indexer's `tokens_hash` for a block without
 * extra keys:
 *
 *     bytes = token_ids[i*bs .. (i+1)*bs) as little-endian u32, concatenated
 *     seed  = 1337
 *           + XXH3_64(lora_name, seed 0)    if lora_name is non-empty
 *           + XXH3_64(cache_salt, seed 1)   if cache_salt is non-empty and
 *                                           i is the sequence's first block
 *     local_hash[i] = XXH3_64(bytes || extra[i], seed)
 *
 * (additions wrap modulo 2^64). A trailing partial block is not hashed.
 *
 * Extra keys. An engine that hashes more than a block's tokens (vLLM's
 * extra_keys) makes blocks with equal tokens different cache entries; the
 * local hash differs exactly where the engine's does:
 *
 *   - the LoRA name, on every block of a LoRA request, is in the seed;
 *   - the cache salt, which vLLM puts on the request's first block only,
 *     is in the seed of the first block only. Every later block is salted
 *     through the chain (its sequence hash follows the salted first block),
 *     so a continuation event, which carries no salt, lands on the salted
 *     keys. /query_by_hash callers salt the first block only;
 *   - multimodal items and prompt-embeds digests are the bytes extra[i],
 *     hashed after the tokens, one record per item in the engine's order:
 *
 *         'm' le32(len) identifier le64(offset)  an item overlapping the
 *             block, offset = item start - block start (negative when the
 *             item began in an earlier block), vLLM's (identifier, offset)
 *         'i' le32(len) identifier               an item named by its
 *             identifier alone (engines before the offset was added)
 *         'e' le32(len) digest                   a prompt-embeds digest
 *         'u' le32(0)                            a key of a kind not known
 *             yet: no query derives it, so the block matches nothing
 *
 *     extra[i] is empty for a block without items, so plain text, with or
 *     without LoRA, keeps the standalone `tokens_hash`.
 *
 * A query derives a block's items from the prompt's items (identifier,
 * offset, length in token positions, sorted, not overlapping) the way vLLM
 * does: every item with offset < block end and offset + length > block
 * start, in order (kvi_prompt_hashes).
 *
 * Sequence hash (docs/design.md#index-and-scoring). The index keys blocks by a
 * hash of the whole prefix that ends at them, so that equal sequence hashes
 * mean equal prefixes (up to 64-bit collisions):
 *
 *     seq_hash[0] = XXH3_64(le64(KVI_SEQ_ROOT) || le64(local_hash[0]), seed 0)
 *     seq_hash[i] = XXH3_64(le64(seq_hash[i-1]) || le64(local_hash[i]), seed 0)
 *
 * that is, kvi_seq_hash(parent, local) with parent = KVI_SEQ_ROOT for the
 * first block of a sequence. The chain depends only on local hashes, so a
 * stored event (token ids), a /kv_recover dump (tokens_hash) and a query
 * (token ids or local hashes) all land on the same keys. The model is not
 * hashed: indexes are partitioned by model instead.
 *
 * All functions are pure and thread-safe (a kvi_xbuf belongs to its
 * caller).
 */
#ifndef KVI_COMMON_HASH_H
#define KVI_COMMON_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVI_LOCAL_HASH_SEED 1337u

/* The parent of the first block of every sequence. */
#define KVI_SEQ_ROOT UINT64_C(0x6b76696e64657830) /* "kvindex0" */

/* kvi_local_seed returns the local-hash seed for a LoRA name and a cache
 * salt; either may be NULL or empty (length 0), which leaves it out. */
uint64_t kvi_local_seed(const char *lora_name, size_t lora_len,
			const char *cache_salt, size_t salt_len);

/* kvi_local_hash returns the local hash of one block of bs tokens. */
uint64_t kvi_local_hash(const uint32_t *tokens, size_t bs, uint64_t seed);

/* kvi_local_hashes hashes every full block of tokens[0..n) into out, which
 * must hold n / bs entries, and returns the number of blocks (n / bs).
 * bs must be positive. */
size_t kvi_local_hashes(const uint32_t *tokens, size_t n, size_t bs,
			uint64_t seed, uint64_t *out);

/* kvi_seq_hash returns the sequence hash of the block whose local hash is
 * local, following the block whose sequence hash is parent (KVI_SEQ_ROOT for
 * the first block). */
uint64_t kvi_seq_hash(uint64_t parent, uint64_t local);

/* kvi_seq_hashes chains local[0..n) from parent into out[0..n); out may
 * alias local. */
void kvi_seq_hashes(uint64_t parent, const uint64_t *local, size_t n,
		    uint64_t *out);

/* The records of a block's extra bytes. */
#define KVI_EXTRA_MM      'm'
#define KVI_EXTRA_IDENT   'i'
#define KVI_EXTRA_EMBEDS  'e'
#define KVI_EXTRA_UNKNOWN 'u' /* a key of a later engine: matches nothing */

/* A growable byte buffer for the extra bytes of one block; zero-initialise
 * it, reuse it across blocks (kvi_xbuf_reset), free it with
 * kvi_xbuf_fini. */
typedef struct kvi_xbuf {
	uint8_t *p;
	size_t len, cap;
} kvi_xbuf;

void kvi_xbuf_reset(kvi_xbuf *x);
void kvi_xbuf_fini(kvi_xbuf *x);

/* kvi_xbuf_mm appends an item (identifier, offset from the block start). */
void kvi_xbuf_mm(kvi_xbuf *x, const char *id, size_t id_len, int64_t offset);

/* kvi_xbuf_record appends a record of kind KVI_EXTRA_IDENT or
 * KVI_EXTRA_EMBEDS with len bytes. */
void kvi_xbuf_record(kvi_xbuf *x, uint8_t kind, const void *bytes, size_t len);

/* kvi_local_hash_extra is kvi_local_hash over the tokens followed by
 * extra_len extra bytes (none: the same as kvi_local_hash). */
uint64_t kvi_local_hash_extra(const uint32_t *tokens, size_t bs, uint64_t seed,
			      const void *extra, size_t extra_len);

/* A multimodal item of a prompt, in token positions (vLLM's mm_features). */
typedef struct kvi_mm_item {
	const char *id;
	size_t id_len;
	uint64_t offset;
	uint64_t length;
} kvi_mm_item;

/* kvi_mm_block_items appends to x the items of mm[0..n) (sorted by offset)
 * that overlap the block [start, start + bs), starting the scan at *next,
 * which it advances past the items that end inside the block, as vLLM
 * does. */
void kvi_mm_block_items(const kvi_mm_item *mm, size_t n, size_t *next,
			uint64_t start, size_t bs, kvi_xbuf *x);

/* The parts of a prompt that enter its local hashes besides the tokens;
 * every field may be NULL / 0. */
typedef struct kvi_prompt_keys {
	const char *lora_name;
	size_t lora_len;
	const char *cache_salt;
	size_t salt_len;
	const kvi_mm_item *mm;
	size_t n_mm;
} kvi_prompt_keys;

/* kvi_prompt_hashes writes the local hashes of every full block of the
 * prompt tokens[0..n) (a sequence from its first block) into out, which
 * must hold n / bs entries, and returns n / bs. x is scratch. */
size_t kvi_prompt_hashes(const uint32_t *tokens, size_t n, size_t bs,
			 const kvi_prompt_keys *keys, kvi_xbuf *x,
			 uint64_t *out);

#endif /* KVI_COMMON_HASH_H */
