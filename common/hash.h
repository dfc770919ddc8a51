/*
 * hash.h - local block hashes and the sequence-hash chain.
 *
 * Local hash (WIRE.md §4). The hash of one block of tokens, identical to the
 * standalone KV indexer's `tokens_hash`:
 *
 *     bytes = token_ids[i*bs .. (i+1)*bs) as little-endian u32, concatenated
 *     seed  = 1337
 *           + XXH3_64(lora_name, seed 0)    if lora_name is non-empty
 *           + XXH3_64(cache_salt, seed 1)   if cache_salt is non-empty
 *     local_hash[i] = XXH3_64(bytes, seed)
 *
 * (additions wrap modulo 2^64). A trailing partial block is not hashed.
 *
 * Sequence hash (DESIGN.md §8). The index keys blocks by a hash of the whole
 * prefix that ends at them, so that equal sequence hashes mean equal prefixes
 * (up to 64-bit collisions):
 *
 *     seq_hash[0] = XXH3_64(le64(KVI_SEQ_ROOT) || le64(local_hash[0]), seed 0)
 *     seq_hash[i] = XXH3_64(le64(seq_hash[i-1]) || le64(local_hash[i]), seed 0)
 *
 * that is, kvi_seq_hash(parent, local) with parent = KVI_SEQ_ROOT for the
 * first block of a sequence. The chain depends only on local hashes, so a
 * stored event (token ids), a /kv_recover dump (tokens_hash) and a query
 * (token ids or local hashes) all land on the same keys. LoRA and cache salt
 * enter through the local hash seed. The model is not hashed: indexes are
 * partitioned by model instead.
 *
 * All functions are pure and thread-safe.
 */
#ifndef KVI_COMMON_HASH_H
#define KVI_COMMON_HASH_H

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

#endif /* KVI_COMMON_HASH_H */
