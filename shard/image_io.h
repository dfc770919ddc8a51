/*
 * image_io.h - writing and reading an index image (index_image.c): a file
 * written in one sequential pass, with an XXH3 digest of everything in it
 * at its end, and read back the same way straight into the slot arrays.
 *
 * Both sides are buffered for the small fields, and copy large arrays
 * straight between the file and memory. Errors are sticky: once a call
 * fails, later calls do nothing and kvx_imgw_finish()/kvx_imgr_finish()
 * say what went wrong first.
 */
#ifndef KVI_SHARD_IMAGE_IO_H
#define KVI_SHARD_IMAGE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

#define KVX_IMG_BUF ((size_t)1 << 20)

typedef struct kvx_imgw {
	int fd;
	uint8_t *buf;
	size_t used;
	XXH3_state_t *xs;
	int err; /* errno of the first failure, or 0 */
} kvx_imgw;

typedef struct kvx_imgr {
	int fd;
	uint8_t *buf;
	size_t pos, end; /* what buf holds, unread */
	uint64_t left;   /* bytes of the body not yet consumed */
	XXH3_state_t *xs;
	char why[128]; /* the first failure, or "" */
} kvx_imgr;

void kvx_imgw_init(kvx_imgw *w, int fd);
void kvx_imgw_put(kvx_imgw *w, const void *p, size_t n);
/* kvx_imgw_finish appends the digest, flushes, frees w's buffers, and
 * returns 0 or the errno of the first failure. */
int kvx_imgw_finish(kvx_imgw *w);

/* kvx_imgr_init starts reading the image fd (at offset 0); false (and
 * r->why) if it is too short to hold a digest. */
bool kvx_imgr_init(kvx_imgr *r, int fd);
/* kvx_imgr_get reads n bytes into p; false once anything failed. */
bool kvx_imgr_get(kvx_imgr *r, void *p, size_t n);
/* kvx_imgr_fail records why the image is refused (the first reason
 * wins) and returns false. */
bool kvx_imgr_fail(kvx_imgr *r, const char *why);
/* kvx_imgr_finish checks that the body was read whole and matches its
 * digest, frees r's buffers, and returns whether everything held. */
bool kvx_imgr_finish(kvx_imgr *r);
/* kvx_imgr_free frees r's buffers without checking anything. */
void kvx_imgr_free(kvx_imgr *r);

static inline void
kvx_imgw_u64(kvx_imgw *w, uint64_t v)
{
	kvx_imgw_put(w, &v, sizeof(v));
}

static inline void
kvx_imgw_u32(kvx_imgw *w, uint32_t v)
{
	kvx_imgw_put(w, &v, sizeof(v));
}

static inline uint64_t
kvx_imgr_u64(kvx_imgr *r)
{
	uint64_t v = 0;
	return kvx_imgr_get(r, &v, sizeof(v)) ? v : 0;
}

static inline uint32_t
kvx_imgr_u32(kvx_imgr *r)
{
	uint32_t v = 0;
	return kvx_imgr_get(r, &v, sizeof(v)) ? v : 0;
}

#endif /* KVI_SHARD_IMAGE_IO_H */
