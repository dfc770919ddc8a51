/*
 * image_io.h - writing and reading an index image (index_image.c): a file
 * written in one sequential pass - a header, then a body with an XXH3
 * digest of it at its end - and read back the same way straight into the
 * slot arrays.
 *
 * Both sides are buffered for the small fields, and copy large arrays
 * straight between the file and memory. The writer hashes what it is given
 * with kvx_imgw_put (the body) and not what it is given with kvx_imgw_raw
 * (the header, which index_image.c checks with a checksum of its own).
 * Errors are sticky: once a call fails, later calls do nothing and
 * kvx_imgw_finish()/kvx_imgr_finish() say what went wrong first.
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
	uint64_t body; /* bytes given to kvx_imgw_put (hashed) */
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
/* kvx_imgw_put writes n bytes of the body; kvx_imgw_raw writes n bytes
 * that the digest does not cover (the header, before any put). */
void kvx_imgw_put(kvx_imgw *w, const void *p, size_t n);
void kvx_imgw_raw(kvx_imgw *w, const void *p, size_t n);
/* kvx_imgw_finish appends the digest of the body, flushes, frees w's
 * buffers, and returns 0 or the errno of the first failure; w->body stays
 * the body's length. */
int kvx_imgw_finish(kvx_imgw *w);

/* kvx_imgr_init starts reading the body of the image fd, body_len bytes
 * at offset off followed by its digest (the header says where); false
 * (and r->why) when fd cannot be positioned there. */
bool kvx_imgr_init(kvx_imgr *r, int fd, uint64_t off, uint64_t body_len);
/* kvx_imgr_get reads n bytes of the body into p; false once anything
 * failed, or when the body holds fewer than n more bytes. */
bool kvx_imgr_get(kvx_imgr *r, void *p, size_t n);
/* kvx_imgr_fail records why the image is refused (the first reason
 * wins) and returns false. */
bool kvx_imgr_fail(kvx_imgr *r, const char *why);
/* kvx_imgr_finish checks that the body was read whole and matches its
 * digest, frees r's buffers, and returns whether everything held. */
bool kvx_imgr_finish(kvx_imgr *r);
/* kvx_imgr_free frees r's buffers without checking anything. */
void kvx_imgr_free(kvx_imgr *r);

/* kvx_img_body_intact reads the body of the image fd (body_len bytes at
 * off) and its digest again, apart from any reader, and says whether they
 * match: whether a body refused for what it holds is damaged. */
bool kvx_img_body_intact(int fd, uint64_t off, uint64_t body_len);

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
