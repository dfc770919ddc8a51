#include "hash.h"

#include <string.h>

#include "alloc.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bytes.h"

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

void
kvi_xbuf_reset(kvi_xbuf *x)
{
	x->len = 0;
}

void
kvi_xbuf_fini(kvi_xbuf *x)
{
	kvi_free(x->p);
	*x = (kvi_xbuf){0};
}

static uint8_t *
kvi_xbuf_grow(kvi_xbuf *x, size_t n)
{
	if (x->cap - x->len < n) {
		size_t cap = x->cap ? x->cap : 64;
		while (cap - x->len < n) {
			cap *= 2;
		}
		x->p = kvi_realloc(x->p, cap);
		x->cap = cap;
	}
	uint8_t *at = x->p + x->len;
	x->len += n;
	return at;
}

void
kvi_xbuf_record(kvi_xbuf *x, uint8_t kind, const void *bytes, size_t len)
{
	uint8_t *p = kvi_xbuf_grow(x, 5 + len);
	p[0] = kind;
	kvi_put_le32(p + 1, (uint32_t)len);
	if (len > 0) {
		memcpy(p + 5, bytes, len);
	}
}

void
kvi_xbuf_mm(kvi_xbuf *x, const char *id, size_t id_len, int64_t offset)
{
	kvi_xbuf_record(x, KVI_EXTRA_MM, id, id_len);
	kvi_put_le64(kvi_xbuf_grow(x, 8), (uint64_t)offset);
}

uint64_t
kvi_local_hash_extra(const uint32_t *tokens, size_t bs, uint64_t seed,
		     const void *extra, size_t extra_len)
{
	if (extra_len == 0) {
		return kvi_local_hash(tokens, bs, seed);
	}
	XXH3_state_t st;
	memset(&st, 0, sizeof(st));
	XXH3_64bits_reset_withSeed(&st, seed);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	XXH3_64bits_update(&st, tokens, bs * sizeof(uint32_t));
#else
	for (size_t i = 0; i < bs; i++) {
		uint8_t b[4];
		kvi_put_le32(b, tokens[i]);
		XXH3_64bits_update(&st, b, sizeof(b));
	}
#endif
	XXH3_64bits_update(&st, extra, extra_len);
	return XXH3_64bits_digest(&st);
}

void
kvi_mm_block_items(const kvi_mm_item *mm, size_t n, size_t *next,
		   uint64_t start, size_t bs, kvi_xbuf *x)
{
	uint64_t end = start + bs;
	size_t i = *next;
	while (i < n && mm[i].offset < end) {
		const kvi_mm_item *it = &mm[i];
		if (it->offset + it->length <= start) {
			i++; /* the block is past this item */
			continue;
		}
		kvi_xbuf_mm(x, it->id, it->id_len,
			    (int64_t)it->offset - (int64_t)start);
		if (it->offset + it->length > end) {
			break; /* the item goes on into the next block */
		}
		i++;
	}
	*next = i;
}

size_t
kvi_prompt_hashes(const uint32_t *tokens, size_t n, size_t bs,
		  const kvi_prompt_keys *k, kvi_xbuf *x, uint64_t *out)
{
	uint64_t seed = kvi_local_seed(k->lora_name, k->lora_len, NULL, 0);
	uint64_t first = kvi_local_seed(k->lora_name, k->lora_len,
					k->cache_salt, k->salt_len);
	size_t blocks = n / bs, next = 0;
	for (size_t i = 0; i < blocks; i++) {
		kvi_xbuf_reset(x);
		if (k->n_mm > 0) {
			kvi_mm_block_items(k->mm, k->n_mm, &next, i * bs, bs,
					   x);
		}
		out[i] = kvi_local_hash_extra(
		    tokens + i * bs, bs, i == 0 ? first : seed, x->p, x->len);
	}
	return blocks;
}
