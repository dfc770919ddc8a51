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
 *   header     magic, version, layout, the caller's stamp
 *   directory  the partitions (model, block size), then the listeners
 *              (id, partition), in the order their bodies follow
 *   bodies     each partition's holder stripes (holders.c), then each
 *              listener's four maps (table_impl.h)
 *   digest     XXH3-64 of everything before it
 *
 * The directory is checked against the index before anything is read
 * into it; a body or digest that fails leaves the index as it was.
 */
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "image_io.h"
#include "index_int.h"

#define KVX_IMAGE_MAGIC   "KVXIMAGE"
#define KVX_IMAGE_VERSION 1u
#define KVX_IMAGE_ORDER   0x01020304u

/* kvx_image_layout packs what the slot arrays' bytes depend on. */
static uint64_t
kvx_image_layout(void)
{
	return (uint64_t)sizeof(kvx_refmap_slot) |
	       (uint64_t)sizeof(kvx_extmap_slot) << 8 |
	       (uint64_t)sizeof(kvx_seqmap_slot) << 16 |
	       (uint64_t)sizeof(kvx_countmap_slot) << 24 |
	       (uint64_t)sizeof(kvx_aliasmap_slot) << 32 |
	       (uint64_t)KVX_STRIPE_BITS << 40 | (uint64_t)KVX_REF_BITS << 48 |
	       (uint64_t)KVX_POOL_SIZES << 56;
}

/* kvx_image_count counts idx's partitions and listeners. */
static void
kvx_image_count(const kvx_index *idx, uint32_t *n_parts, uint32_t *n_lis)
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
kvx_image_save_lis(const kvx_lis *l, kvx_imgw *w)
{
	kvx_refmap_save(&l->ext, w);
	kvx_extmap_save(&l->exc, w);
	kvx_countmap_save(&l->exc_seqs, w);
	kvx_aliasmap_save(&l->alias, w);
}

static bool
kvx_image_load_lis(kvx_lis *l, kvx_imgr *r)
{
	bool ok = kvx_refmap_load(&l->ext, r) && kvx_extmap_load(&l->exc, r) &&
		  kvx_countmap_load(&l->exc_seqs, r) &&
		  kvx_aliasmap_load(&l->alias, r);
	kvx_entries_sync(l);
	return ok;
}

kvi_err
kvx_image_save(kvx_index *idx, int fd, const void *stamp, size_t stamp_len,
	       char *err, size_t errlen)
{
	kvx_imgw w;
	kvx_imgw_init(&w, fd);
	kvx_imgw_put(&w, KVX_IMAGE_MAGIC, 8);
	kvx_imgw_u32(&w, KVX_IMAGE_VERSION);
	kvx_imgw_u32(&w, KVX_IMAGE_ORDER);
	kvx_imgw_u64(&w, kvx_image_layout());
	kvx_imgw_u32(&w, (uint32_t)stamp_len);
	kvx_imgw_put(&w, stamp, stamp_len);
	pthread_rwlock_rdlock(&idx->meta);
	uint32_t n_parts, n_lis;
	kvx_image_count(idx, &n_parts, &n_lis);
	kvx_imgw_u32(&w, n_parts);
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		uint32_t len = (uint32_t)strlen(p->model);
		kvx_imgw_u32(&w, len);
		kvx_imgw_put(&w, p->model, len);
		kvx_imgw_u32(&w, p->block_size);
	}
	kvx_imgw_u32(&w, n_lis);
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l == NULL) {
			continue;
		}
		uint32_t k = 0;
		for (kvx_part *p = idx->parts; p != l->part; p = p->next) {
			k++;
		}
		kvx_imgw_u32(&w, i);
		kvx_imgw_u32(&w, k);
	}
	for (kvx_part *p = idx->parts; p != NULL; p = p->next) {
		pthread_rwlock_rdlock(&p->lock);
		kvx_hold_save(&p->holders, &w);
		pthread_rwlock_unlock(&p->lock);
	}
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l != NULL) {
			pthread_rwlock_rdlock(&l->part->lock);
			kvx_image_save_lis(l, &w);
			pthread_rwlock_unlock(&l->part->lock);
		}
	}
	pthread_rwlock_unlock(&idx->meta);
	int e = kvx_imgw_finish(&w);
	if (e != 0) {
		return kvi_errf(err, errlen, KVI_EIO, "writing the image: %s",
				strerror(e));
	}
	return KVI_OK;
}

/* kvx_image_header reads and checks the header; stale says whether it is
 * an image of this layout with another stamp. */
static bool
kvx_image_header(kvx_imgr *r, const void *stamp, size_t stamp_len, bool *stale)
{
	char magic[8];
	*stale = false;
	if (!kvx_imgr_get(r, magic, sizeof(magic))) {
		return false;
	}
	uint32_t version = kvx_imgr_u32(r), order = kvx_imgr_u32(r);
	uint64_t layout = kvx_imgr_u64(r);
	if (memcmp(magic, KVX_IMAGE_MAGIC, 8) != 0 ||
	    version != KVX_IMAGE_VERSION || order != KVX_IMAGE_ORDER ||
	    layout != kvx_image_layout()) {
		return kvx_imgr_fail(r, "not an image of this build's layout");
	}
	uint8_t got[KVX_IMAGE_STAMP_MAX];
	uint32_t len = kvx_imgr_u32(r);
	if (len > sizeof(got) || !kvx_imgr_get(r, got, len)) {
		return kvx_imgr_fail(r, "bad stamp");
	}
	if (len != stamp_len || memcmp(got, stamp, len) != 0) {
		*stale = true;
		return kvx_imgr_fail(r, "the store has changed since");
	}
	return true;
}

kvi_err
kvx_image_check(int fd, const void *stamp, size_t stamp_len, char *err,
		size_t errlen)
{
	kvx_imgr r;
	bool stale = false;
	bool ok = kvx_imgr_init(&r, fd) &&
		  kvx_image_header(&r, stamp, stamp_len, &stale);
	kvi_err rv =
	    ok ? KVI_OK
	       : kvi_errf(err, errlen, stale ? KVI_ENOENT : KVI_ECORRUPT, "%s",
			  r.why);
	kvx_imgr_free(&r); /* only the header was wanted */
	lseek(fd, 0, SEEK_SET);
	return rv;
}

/* kvx_image_dir reads the directory into parts[] and lids[] and checks it
 * names exactly the index's partitions and listeners. */
static bool
kvx_image_dir(kvx_index *idx, kvx_imgr *r, kvx_part ***parts, uint32_t *n_parts,
	      uint32_t **lids, uint32_t *n_lis)
{
	uint32_t have_parts, have_lis;
	kvx_image_count(idx, &have_parts, &have_lis);
	*n_parts = kvx_imgr_u32(r);
	if (*n_parts != have_parts) {
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
	if (*n_lis != have_lis) {
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
	return r->why[0] == '\0';
}

/* kvx_image_empty drops whatever a refused load left in the index. */
static void
kvx_image_empty(kvx_index *idx)
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

kvi_err
kvx_image_load(kvx_index *idx, int fd, const void *stamp, size_t stamp_len,
	       char *err, size_t errlen)
{
	kvx_imgr r;
	bool stale = false;
	kvx_part **parts = NULL;
	uint32_t *lids = NULL, n_parts = 0, n_lis = 0;
	pthread_rwlock_rdlock(&idx->meta);
	for (uint32_t i = 0; i < idx->cap_lis; i++) {
		kvx_lis *l = idx->lis[i];
		if (l != NULL && atomic_load(&l->entries) != 0) {
			pthread_rwlock_unlock(&idx->meta);
			return kvi_errf(err, errlen, KVI_EINVAL,
					"listener %u holds entries already", i);
		}
	}
	bool ok = kvx_imgr_init(&r, fd) &&
		  kvx_image_header(&r, stamp, stamp_len, &stale) &&
		  kvx_image_dir(idx, &r, &parts, &n_parts, &lids, &n_lis);
	bool touched = ok;
	for (uint32_t k = 0; ok && k < n_parts; k++) {
		ok = kvx_hold_load(&parts[k]->holders, &r);
	}
	for (uint32_t k = 0; ok && k < n_lis; k++) {
		ok = kvx_image_load_lis(kvx_lis_get(idx, lids[k]), &r);
	}
	ok = kvx_imgr_finish(&r) && ok;
	if (!ok && touched) {
		kvx_image_empty(idx);
	}
	pthread_rwlock_unlock(&idx->meta);
	kvi_free(parts);
	kvi_free(lids);
	if (ok) {
		return KVI_OK;
	}
	return kvi_errf(err, errlen, stale ? KVI_ENOENT : KVI_ECORRUPT, "%s",
			r.why);
}
