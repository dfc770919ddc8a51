/*
 * bytes.h - fixed-width integers in byte order, and sealed values: the
 * codecs of every on-disk and on-wire layout kvindex writes itself (the
 * shard's store, the coordinator's store, the hash inputs). Header-only.
 *
 * Keys that LMDB must sort numerically are big-endian; values are
 * little-endian. A sealed value is [XXH32 of the rest, LE][rest]: a
 * record that does not match its seal was damaged and is not trusted.
 */
#ifndef KVI_COMMON_BYTES_H
#define KVI_COMMON_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

static inline void
kvi_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++) {
		p[i] = (uint8_t)(v >> (8 * i));
	}
}

static inline void
kvi_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(v >> (8 * i));
	}
}

static inline uint32_t
kvi_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t
kvi_get_le64(const uint8_t *p)
{
	return (uint64_t)kvi_get_le32(p) | (uint64_t)kvi_get_le32(p + 4) << 32;
}

static inline void
kvi_put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++) {
		p[i] = (uint8_t)(v >> (24 - 8 * i));
	}
}

static inline void
kvi_put_be64(uint8_t *p, uint64_t v)
{
	kvi_put_be32(p, (uint32_t)(v >> 32));
	kvi_put_be32(p + 4, (uint32_t)v);
}

static inline uint32_t
kvi_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t
kvi_get_be64(const uint8_t *p)
{
	return (uint64_t)kvi_get_be32(p) << 32 | kvi_get_be32(p + 4);
}

/* kvi_seal writes the seal of v[4..len) into v[0..4); len >= 4. */
static inline void
kvi_seal(uint8_t *v, size_t len)
{
	kvi_put_le32(v, XXH32(v + 4, len - 4, 0));
}

/* kvi_sealed says whether v[0..len) carries its own seal. */
static inline bool
kvi_sealed(const void *v, size_t len)
{
	const uint8_t *p = v;
	return len >= 4 && kvi_get_le32(p) == XXH32(p + 4, len - 4, 0);
}

#endif /* KVI_COMMON_BYTES_H */
