#include "image_io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"

/* img_digest_new returns a fresh XXH3-64 state. */
static XXH3_state_t *
img_digest_new(void)
{
	XXH3_state_t *xs = XXH3_createState();
	if (xs == NULL) {
		kvi_oom(1024);
	}
	XXH3_64bits_reset(xs);
	return xs;
}

/* ---- writing ------------------------------------------------------- */

static void
imgw_write(kvx_imgw *w, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (w->err == 0 && n > 0) {
		ssize_t k = write(w->fd, b, n);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k <= 0) {
			w->err = k < 0 ? errno : EIO;
			return;
		}
		b += k;
		n -= (size_t)k;
	}
}

static void
imgw_flush(kvx_imgw *w)
{
	imgw_write(w, w->buf, w->used);
	w->used = 0;
}

void
kvx_imgw_init(kvx_imgw *w, int fd)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->buf = kvi_malloc(KVX_IMG_BUF);
	w->xs = img_digest_new();
}

void
kvx_imgw_put(kvx_imgw *w, const void *p, size_t n)
{
	if (w->err != 0 || n == 0) {
		return;
	}
	XXH3_64bits_update(w->xs, p, n);
	w->body += n;
	kvx_imgw_raw(w, p, n);
}

void
kvx_imgw_raw(kvx_imgw *w, const void *p, size_t n)
{
	if (w->err != 0 || n == 0) {
		return;
	}
	if (n >= KVX_IMG_BUF / 4) {
		imgw_flush(w);
		imgw_write(w, p, n);
		return;
	}
	if (w->used + n > KVX_IMG_BUF) {
		imgw_flush(w);
	}
	memcpy(w->buf + w->used, p, n);
	w->used += n;
}

int
kvx_imgw_finish(kvx_imgw *w)
{
	uint64_t d = XXH3_64bits_digest(w->xs);
	if (w->used + sizeof(d) > KVX_IMG_BUF) {
		imgw_flush(w);
	}
	memcpy(w->buf + w->used, &d, sizeof(d));
	w->used += sizeof(d);
	imgw_flush(w);
	XXH3_freeState(w->xs);
	kvi_free(w->buf);
	w->xs = NULL;
	w->buf = NULL;
	return w->err;
}

/* ---- reading ------------------------------------------------------- */

bool
kvx_imgr_fail(kvx_imgr *r, const char *why)
{
	if (r->why[0] == '\0') {
		snprintf(r->why, sizeof(r->why), "%s", why);
	}
	return false;
}

/* imgr_read reads exactly n bytes from the file into p. */
static bool
imgr_read(kvx_imgr *r, uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = read(r->fd, p, n);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k <= 0) {
			char why[96];
			snprintf(why, sizeof(why), "read: %s",
				 k < 0 ? strerror(errno)
				       : "the file ended early");
			return kvx_imgr_fail(r, why);
		}
		p += k;
		n -= (size_t)k;
	}
	return true;
}

bool
kvx_imgr_init(kvx_imgr *r, int fd, uint64_t off, uint64_t body_len)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->buf = kvi_malloc(KVX_IMG_BUF);
	r->xs = img_digest_new();
	r->left = body_len;
	if (lseek(fd, (off_t)off, SEEK_SET) != (off_t)off) {
		char why[96];
		snprintf(why, sizeof(why), "seek: %s", strerror(errno));
		return kvx_imgr_fail(r, why);
	}
	return true;
}

bool
kvx_imgr_get(kvx_imgr *r, void *p, size_t n)
{
	if (r->why[0] != '\0') {
		return false;
	}
	if (n > r->left) {
		return kvx_imgr_fail(r, "its tables run past the end of the "
					"body its header gives");
	}
	uint8_t *out = p;
	size_t have = r->end - r->pos, take = have < n ? have : n;
	memcpy(out, r->buf + r->pos, take);
	r->pos += take;
	size_t rest = n - take;
	if (rest >= KVX_IMG_BUF / 4) {
		if (!imgr_read(r, out + take, rest)) {
			return false;
		}
	} else if (rest > 0) {
		/* refill: at most what the body still holds past this read,
		 * so the digest stays in the file */
		uint64_t body = r->left - n + rest;
		size_t want = body < KVX_IMG_BUF ? (size_t)body : KVX_IMG_BUF;
		if (!imgr_read(r, r->buf, want)) {
			return false;
		}
		r->pos = rest;
		r->end = want;
		memcpy(out + take, r->buf, rest);
	}
	r->left -= n;
	XXH3_64bits_update(r->xs, p, n);
	return true;
}

bool
kvx_imgr_finish(kvx_imgr *r)
{
	bool ok = r->why[0] == '\0';
	if (ok && (r->left != 0 || r->pos != r->end)) {
		ok = kvx_imgr_fail(r, "its tables end before the body its "
				      "header gives");
	}
	uint64_t d = 0;
	if (ok && !imgr_read(r, (uint8_t *)&d, sizeof(d))) {
		ok = false;
	}
	if (ok && d != XXH3_64bits_digest(r->xs)) {
		ok = kvx_imgr_fail(r, "bad checksum: the body does not match "
				      "its digest");
	}
	kvx_imgr_free(r);
	return ok;
}

void
kvx_imgr_free(kvx_imgr *r)
{
	XXH3_freeState(r->xs);
	kvi_free(r->buf);
	r->xs = NULL;
	r->buf = NULL;
}

bool
kvx_img_body_intact(int fd, uint64_t off, uint64_t body_len)
{
	XXH3_state_t *xs = img_digest_new();
	uint8_t *buf = kvi_malloc(KVX_IMG_BUF);
	uint64_t at = off, end = off + body_len, d = 0;
	bool ok = true;
	while (ok && at < end) {
		size_t want =
		    end - at < KVX_IMG_BUF ? (size_t)(end - at) : KVX_IMG_BUF;
		ssize_t k = pread(fd, buf, want, (off_t)at);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		ok = k > 0;
		if (ok) {
			XXH3_64bits_update(xs, buf, (size_t)k);
			at += (uint64_t)k;
		}
	}
	ok = ok && pread(fd, &d, sizeof(d), (off_t)end) == sizeof(d) &&
	     d == XXH3_64bits_digest(xs);
	kvi_free(buf);
	XXH3_freeState(xs);
	return ok;
}
