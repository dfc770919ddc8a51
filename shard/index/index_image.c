/*
 * index_image.c - the whole index in one file, for a restart after a clean
 * stop (index.h says when an image may be used).
 *
 * Rebuilding the index from the store hashes and places every entry again:
 * at 10M entries that is most of a restart. An image instead holds every
 * table's slot array as it is in memory, so reading it back is a copy from
 * the file, at the speed of the page cache.
 *
 * It is a cache of the store, written and read by the same build on the
 * same machine: integers are in the machine's byte order, and a layout
 * word (the sizes the slot arrays depend on) refuses an image of another
 * layout. The file:
 *
 *   header     magic, version, byte order, layout, the body's length, the
 *              caller's stamp, and an XXH3-64 of all of these
 *   body       the directory: the partitions (model, block size), then the
 *              listeners (id, partition), in the order their tables
 *              follow; then each partition's holder stripes (holders.c)
 *              and each listener's four maps (table_impl.h)
 *   digest     XXH3-64 of the body
 *
 * The header is checked on its own before anything else, so that a
 * refusal says why: another version or layout, a damaged header, a file
 * cut short or longer than its header says, or a store that has moved on
 * since (a stale image, the one refusal that is not damage). A body that
 * does not read as the index (another set of listeners, a table out of
 * range) is read again for its digest: a mismatch says it is damaged.
 * The directory is checked against the index before anything is read
 * into it; a body or digest that fails leaves the index as it was.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "image_io.h"
#include "index_int.h"

#define KVX_IMAGE_MAGIC   "KVXIMAGE"
#define KVX_IMAGE_VERSION 2u
#define KVX_IMAGE_ORDER   0x01020304u
/* magic, version, order, layout, body length, stamp length */
#define KVX_HEAD_FIXED (8 + 4 + 4 + 8 + 8 + 4)
#define KVX_HEAD_MAX   (KVX_HEAD_FIXED + KVX_IMAGE_STAMP_MAX + 8)

/* image_layout packs what the slot arrays' bytes depend on. */
static uint64_t
image_layout(void)
{
	return (uint64_t)sizeof(kvx_refmap_slot) |
	       (uint64_t)sizeof(kvx_extmap_slot) << 8 |
	       (uint64_t)sizeof(kvx_seqmap_slot) << 16 |
	       (uint64_t)sizeof(kvx_countmap_slot) << 24 |
	       (uint64_t)sizeof(kvx_aliasmap_slot) << 32 |
	       (uint64_t)KVX_STRIPE_BITS << 40 | (uint64_t)KVX_REF_BITS << 48 |
	       (uint64_t)KVX_POOL_SIZES << 56;
}

/* image_count counts idx's partitions and listeners. */
static void
image_count(const kvx_index *idx, uint32_t *n_parts, uint32_t *n_lis)
{
	*n_parts = *n_lis = 0;
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		(*n_parts)++;
	}
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		*n_lis += idx->lis[i] != NULL;
	}
}

static void
image_save_lis(const kvx_lis *l, kvx_imgw *w)
{
	kvx_refmap_save(&l->ext, w);
	kvx_extmap_save(&l->exc, w);
	kvx_countmap_save(&l->exc_seqs, w);
	kvx_aliasmap_save(&l->alias, w);
}

static bool
image_load_lis(kvx_lis *l, kvx_imgr *r)
{
	bool ok = kvx_refmap_load(&l->ext, r) && kvx_extmap_load(&l->exc, r) &&
		  kvx_countmap_load(&l->exc_seqs, r) &&
		  kvx_aliasmap_load(&l->alias, r);
	kvx_entries_sync(l);
	return ok;
}

/* image_head writes the header of an image of stamp whose body is
 * body_len bytes into h (KVX_HEAD_MAX bytes) and returns its length. */
static size_t
image_head(uint8_t *h, const void *stamp, uint32_t stamp_len, uint64_t body_len)
{
	uint32_t version = KVX_IMAGE_VERSION, order = KVX_IMAGE_ORDER;
	uint64_t layout = image_layout();
	memcpy(h, KVX_IMAGE_MAGIC, 8);
	memcpy(h + 8, &version, 4);
	memcpy(h + 12, &order, 4);
	memcpy(h + 16, &layout, 8);
	memcpy(h + 24, &body_len, 8);
	memcpy(h + 32, &stamp_len, 4);
	memcpy(h + KVX_HEAD_FIXED, stamp, stamp_len);
	size_t n = KVX_HEAD_FIXED + stamp_len;
	uint64_t check = XXH3_64bits(h, n);
	memcpy(h + n, &check, 8);
	return n + 8;
}

/* image_save_body writes the directory and the tables. */
static void
image_save_body(kvx_index *idx, kvx_imgw *w)
{
	pthread_rwlock_rdlock(&idx->meta);
	uint32_t n_parts, n_lis;
	image_count(idx, &n_parts, &n_lis);
	kvx_imgw_u32(w, n_parts);
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		uint32_t len = (uint32_t)strlen(p->model);
		kvx_imgw_u32(w, len);
		kvx_imgw_put(w, p->model, len);
		kvx_imgw_u32(w, p->block_size);
	}
	kvx_imgw_u32(w, n_lis);
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l == NULL) {
			continue;
		}
		uint32_t k = 0;
		for (kvx_part *p = idx->parts; p != l->part; p = p->next) {
			k++;
		}
		kvx_imgw_u32(w, i);
		kvx_imgw_u32(w, k);
	}
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		pthread_rwlock_rdlock(&p->lock);
		kvx_hold_save(&p->holders, w);
		pthread_rwlock_unlock(&p->lock);
	}
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l != NULL) {
			pthread_rwlock_rdlock(&l->part->lock);
			image_save_lis(l, w);
			pthread_rwlock_unlock(&l->part->lock);
		}
	}
	pthread_rwlock_unlock(&idx->meta);
}

kvi_err
kvx_image_save(kvx_index *idx, int fd, const void *stamp, size_t stamp_len,
	       char *err, size_t errlen)
{
	if (stamp_len > KVX_IMAGE_STAMP_MAX) {
		return kvi_errf(err, errlen, KVI_EINVAL, "a stamp of %zu bytes",
				stamp_len);
	}
	/* the body's length is known at the end: the header is written
	 * again then, in place */
	off_t start = lseek(fd, 0, SEEK_CUR);
	uint8_t head[KVX_HEAD_MAX];
	size_t hlen = image_head(head, stamp, (uint32_t)stamp_len, 0);
	kvx_imgw w;
	kvx_imgw_init(&w, fd);
	kvx_imgw_raw(&w, head, hlen);
	image_save_body(idx, &w);
	int e = kvx_imgw_finish(&w);
	if (e == 0 && start >= 0) {
		image_head(head, stamp, (uint32_t)stamp_len, w.body);
		ssize_t k = pwrite(fd, head, hlen, start);
		e = k == (ssize_t)hlen ? 0 : k < 0 ? errno : EIO;
	}
	if (e != 0 || start < 0) {
		return kvi_errf(err, errlen, KVI_EIO, "writing the image: %s",
				strerror(e != 0 ? e : errno));
	}
	return KVI_OK;
}

/* Where an image's body is, once its header holds. */
typedef struct kvx_image_at {
	uint64_t off, len;
} kvx_image_at;

/* image_head_id checks what kind of file the header h of n bytes
 * (of a file of size bytes) says it is: an index image, of this byte
 * order and version. Returns KVI_ECORRUPT with the reason otherwise. */
static kvi_err
image_head_id(const uint8_t *h, size_t n, uint64_t size, char *err,
	      size_t errlen)
{
	uint32_t version, order;
	if (n < 16) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"cut short: %llu bytes, less than a header",
				(unsigned long long)size);
	}
	if (memcmp(h, KVX_IMAGE_MAGIC, 8) != 0) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"not an index image: it does not start with "
				"%s",
				KVX_IMAGE_MAGIC);
	}
	memcpy(&version, h + 8, 4);
	memcpy(&order, h + 12, 4);
	if (order == __builtin_bswap32(KVX_IMAGE_ORDER)) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"written on a machine of another byte order");
	}
	if (version != KVX_IMAGE_VERSION) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"version %u, and this build reads version %u "
				"(%s)",
				version, KVX_IMAGE_VERSION,
				version < KVX_IMAGE_VERSION
				    ? "written by an older build"
				    : "written by a newer build, or damaged");
	}
	return KVI_OK;
}

/* image_head_check checks the header h of n bytes read from the
 * start of a file of size bytes, up to its stamp: KVI_ECORRUPT with the
 * reason, else KVI_OK and where the body is (*at). */
static kvi_err
image_head_check(const uint8_t *h, size_t n, uint64_t size, kvx_image_at *at,
		 char *err, size_t errlen)
{
	kvi_err rv = image_head_id(h, n, size, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	uint32_t slen = KVX_IMAGE_STAMP_MAX + 1;
	if (n >= KVX_HEAD_FIXED) {
		memcpy(&slen, h + 32, 4);
	}
	if (n < KVX_HEAD_FIXED ||
	    (slen <= KVX_IMAGE_STAMP_MAX && n < KVX_HEAD_FIXED + slen + 8)) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"cut short: %llu bytes, less than its header",
				(unsigned long long)size);
	}
	uint64_t check = 0, layout;
	if (slen <= KVX_IMAGE_STAMP_MAX) {
		memcpy(&check, h + KVX_HEAD_FIXED + slen, 8);
	}
	if (slen > KVX_IMAGE_STAMP_MAX ||
	    check != XXH3_64bits(h, KVX_HEAD_FIXED + slen)) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"bad checksum: the header is damaged");
	}
	memcpy(&layout, h + 16, 8);
	if (layout != image_layout()) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"written by a build of another slot layout");
	}
	at->off = KVX_HEAD_FIXED + slen + 8;
	memcpy(&at->len, h + 24, 8);
	if (at->len > size || size - at->len != at->off + 8) {
		bool cut = at->len > size || size - at->len < at->off + 8;
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"%s: %llu bytes, and its header says %llu",
				cut ? "cut short" : "too long",
				(unsigned long long)size,
				(unsigned long long)(at->off + 8 + at->len));
	}
	return KVI_OK;
}

/* image_head_read reads the header of the image open at fd into h
 * (KVX_HEAD_MAX bytes) and checks it (image_head_check). */
static kvi_err
image_head_read(int fd, uint8_t *h, kvx_image_at *at, char *err, size_t errlen)
{
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 ? pread(fd, h, KVX_HEAD_MAX, 0) : -1;
	if (n < 0) {
		return kvi_errf(err, errlen, KVI_EIO, "read: %s",
				strerror(errno));
	}
	return image_head_check(h, (size_t)n, (uint64_t)st.st_size, at, err,
				errlen);
}

/* image_header reads and checks the header of the image fd: KVI_OK
 * and where its body is (*at) for an image of this build with stamp,
 * KVI_ENOENT for one of another stamp (the store has moved on since: a
 * stale image), KVI_ECORRUPT for anything else, KVI_EIO when it cannot
 * be read; err says which. */
static kvi_err
image_header(int fd, const void *stamp, size_t stamp_len, kvx_image_at *at,
	     char *err, size_t errlen)
{
	uint8_t h[KVX_HEAD_MAX];
	uint32_t slen = 0;
	kvi_err rv = image_head_read(fd, h, at, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	memcpy(&slen, h + 32, 4);
	if (slen != stamp_len || memcmp(h + KVX_HEAD_FIXED, stamp, slen) != 0) {
		return kvi_errf(err, errlen, KVI_ENOENT,
				"stale: the store has changed since it was "
				"written");
	}
	return KVI_OK;
}

kvi_err
kvx_image_check(int fd, const void *stamp, size_t stamp_len, char *err,
		size_t errlen)
{
	kvx_image_at at;
	return image_header(fd, stamp, stamp_len, &at, err, errlen);
}

kvi_err
kvx_image_stamp(int fd, void *stamp, size_t *stamp_len, char *err,
		size_t errlen)
{
	uint8_t h[KVX_HEAD_MAX];
	kvx_image_at at;
	kvi_err rv = image_head_read(fd, h, &at, err, errlen);
	if (rv == KVI_OK) {
		uint32_t slen;
		memcpy(&slen, h + 32, 4);
		memcpy(stamp, h + KVX_HEAD_FIXED, slen);
		*stamp_len = slen;
	}
	return rv;
}

/* image_fresh says whether idx's listener lid may be missing from the
 * image (the caller's fresh[]). */
static bool
image_fresh(const bool *fresh, size_t n_fresh, uint32_t lid)
{
	return fresh != NULL && lid < n_fresh && fresh[lid];
}

/* image_others checks that every listener of idx the directory does not
 * name (lids[0..n_lis), ascending) is fresh. */
static bool
image_others(kvx_index *idx, const uint32_t *lids, uint32_t n_lis,
	     const bool *fresh, size_t n_fresh)
{
	uint32_t k = 0;
	for (uint32_t lid = 0; lid < idx->cap_lis; lid++) {
		if (k < n_lis && lids[k] == lid) {
			k++;
		} else if (idx->lis[lid] != NULL &&
			   !image_fresh(fresh, n_fresh, lid)) {
			return false;
		}
	}
	return true;
}

/* image_dir reads the directory into parts[] and lids[] and checks it
 * names the index's partitions and listeners: exactly, or all but the
 * fresh ones, for which the index may also have partitions of their
 * own. */
static bool
image_dir(kvx_index *idx, kvx_imgr *r, const bool *fresh, size_t n_fresh,
	  kvx_part ***parts, uint32_t *n_parts, uint32_t **lids,
	  uint32_t *n_lis)
{
	uint32_t have_parts, have_lis;
	image_count(idx, &have_parts, &have_lis);
	*n_parts = kvx_imgr_u32(r);
	if (fresh == NULL ? *n_parts != have_parts : *n_parts > have_parts) {
		return kvx_imgr_fail(r, "another set of models");
	}
	*parts = kvi_calloc(*n_parts + 1, sizeof(**parts));
	for (uint32_t k = 0; k < *n_parts; k++) {
		char model[1024];
		uint32_t len = kvx_imgr_u32(r);
		if (len >= sizeof(model) || !kvx_imgr_get(r, model, len)) {
			return kvx_imgr_fail(r, "bad model name");
		}
		model[len] = '\0';
		uint32_t bs = kvx_imgr_u32(r);
		kvx_part *p = idx->parts;
		while (p != NULL && strcmp(p->model, model) != 0) {
			p = p->next;
		}
		for (uint32_t j = 0; p != NULL && j < k; j++) {
			p = (*parts)[j] == p ? NULL : p;
		}
		if (p == NULL || p->block_size != bs) {
			return kvx_imgr_fail(r, "another set of models");
		}
		(*parts)[k] = p;
	}
	*n_lis = kvx_imgr_u32(r);
	if (*n_lis > have_lis) {
		return kvx_imgr_fail(r, "another set of listeners");
	}
	*lids = kvi_calloc(*n_lis + 1, sizeof(**lids));
	for (uint32_t k = 0; k < *n_lis; k++) {
		uint32_t lid = kvx_imgr_u32(r), part = kvx_imgr_u32(r);
		kvx_lis *l = kvx_lis_get(idx, lid);
		if (l == NULL || part >= *n_parts ||
		    l->part != (*parts)[part] ||
		    (k > 0 && lid <= (*lids)[k - 1])) {
			return kvx_imgr_fail(r, "another set of listeners");
		}
		(*lids)[k] = lid;
	}
	if (r->why[0] == '\0' &&
	    !image_others(idx, *lids, *n_lis, fresh, n_fresh)) {
		return kvx_imgr_fail(r, "another set of listeners");
	}
	return r->why[0] == '\0';
}

/* image_empty drops whatever a refused load left in the index. */
static void
image_empty(kvx_index *idx)
{
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		kvx_hold_fini(&p->holders);
		kvx_hold_init(&p->holders);
	}
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l != NULL) {
			kvx_ents_fini(l);
			kvx_ents_init(l);
			kvx_entries_sync(l);
		}
	}
}

/* image_load_body reads the body into idx; false (and r->why) if it
 * is refused. */
static bool
image_load_body(kvx_index *idx, int fd, const kvx_image_at *at,
		const bool *fresh, size_t n_fresh, kvx_imgr *r)
{
	kvx_part **parts = NULL;
	uint32_t *lids = NULL, n_parts = 0, n_lis = 0;
	bool ok =
	    kvx_imgr_init(r, fd, at->off, at->len) &&
	    image_dir(idx, r, fresh, n_fresh, &parts, &n_parts, &lids, &n_lis);
	bool touched = ok;
	for (uint32_t k = 0; ok && k < n_parts; k++) {
		ok = kvx_hold_load(&parts[k]->holders, r);
	}
	for (uint32_t k = 0; ok && k < n_lis; k++) {
		ok = image_load_lis(kvx_lis_get(idx, lids[k]), r);
	}
	ok = kvx_imgr_finish(r) && ok;
	if (!ok && touched) {
		image_empty(idx);
	}
	kvi_free(parts);
	kvi_free(lids);
	return ok;
}

kvi_err
kvx_image_load(kvx_index *idx, int fd, const void *stamp, size_t stamp_len,
	       const bool *fresh, size_t n_fresh, char *err, size_t errlen)
{
	pthread_rwlock_rdlock(&idx->meta);
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l != NULL && atomic_load(&l->entries) != 0) {
			pthread_rwlock_unlock(&idx->meta);
			return kvi_errf(err, errlen, KVI_EINVAL,
					"listener %u holds entries already", i);
		}
	}
	kvx_image_at at;
	kvi_err rv = image_header(fd, stamp, stamp_len, &at, err, errlen);
	kvx_imgr r;
	if (rv == KVI_OK &&
	    !image_load_body(idx, fd, &at, fresh, n_fresh, &r)) {
		/* what the body held was refused: say whether it is damaged
		 * or another index's (the digest decides) */
		bool digest = strncmp(r.why, "bad checksum", 12) == 0;
		rv = !digest && !kvx_img_body_intact(fd, at.off, at.len)
			 ? kvi_errf(err, errlen, KVI_ECORRUPT,
				    "bad checksum: the body does not match "
				    "its digest (found as: %s)",
				    r.why)
			 : kvi_errf(err, errlen, KVI_ECORRUPT, "%s", r.why);
	}
	pthread_rwlock_unlock(&idx->meta);
	return rv;
}
