#include "hash.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t
kvi_local_seed(const char *lora_name, size_t lora_len, const char *cache_salt,
	       size_t salt_len)
{
	uint64_t seed = KVI_LOCAL_HASH_SEED;
	if (lora_name != NULL && lora_len > 0) {
		seed += XXH3_64bits_withSeed(lora_name, lora_len, 0);
	}
	if (cache_salt != NULL && salt_len > 0) {
		seed += XXH3_64bits_withSeed(cache_salt, salt_len, 1);
	}
	return seed;
}

uint64_t
kvi_local_hash(const uint32_t *tokens, size_t bs, uint64_t seed)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return XXH3_64bits_withSeed(tokens, bs * sizeof(uint32_t), seed);
#else
	XXH3_state_t st;
	XXH3_64bits_reset_withSeed(&st, seed);
	for (size_t i = 0; i < bs; i++) {
		uint8_t b[4] = {(uint8_t)tokens[i], (uint8_t)(tokens[i] >> 8),
				(uint8_t)(tokens[i] >> 16),
				(uint8_t)(tokens[i] >> 24)};
		XXH3_64bits_update(&st, b, sizeof(b));
	}
	return XXH3_64bits_digest(&st);
#endif
}

size_t
kvi_local_hashes(const uint32_t *tokens, size_t n, size_t bs, uint64_t seed,
		 uint64_t *out)
{
	size_t blocks = n / bs;
	for (size_t i = 0; i < blocks; i++) {
		out[i] = kvi_local_hash(tokens + i * bs, bs, seed);
	}
	return blocks;
}

static inline void
kvi_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(v >> (8 * i));
	}
}

uint64_t
kvi_seq_hash(uint64_t parent, uint64_t local)
{
	uint8_t buf[16];
	kvi_put_le64(buf, parent);
	kvi_put_le64(buf + 8, local);
	return XXH3_64bits(buf, sizeof(buf));
}

void
kvi_seq_hashes(uint64_t parent, const uint64_t *local, size_t n, uint64_t *out)
{
	for (size_t i = 0; i < n; i++) {
		parent = kvi_seq_hash(parent, local[i]);
		out[i] = parent;
	}
}
