#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <xxhash.h>

#include "alloc.h"
#include "bytes.h"
#include "lmdb_util.h"

#define KVS_FORMAT          1u
#define KVS_CHUNK_ENTRIES   4096
#define KVS_TRUNCATE_MAX    65536
#define KVS_HEADER_LEN      (4 + 4 + 8 + 1 + 8 + 8 + 8 + 4)
#define KVS_NONE            UINT64_MAX
#define KVS_DEFAULT_MAPSIZE ((size_t)1 << 30)
#define KVS_COMMIT_TRIES    8
/* less free than this on the filesystem, and an I/O error is a full disk */
#define KVS_DISK_LOW ((uint64_t)4 << 20)

/* What the store tracks of each listener id. */
typedef struct kvs_lid {
	bool live;
	uint64_t snap_lsn; /* while loading: records before it are covered */
	uint64_t need;     /* first log record not covered by the snapshot */
} kvs_lid;

struct kvs_store {
	MDB_env *env;
	MDB_dbi meta, log, snap, listeners;
	char *dir;
	size_t map_size, max_map_size;
	uint64_t next_lsn;
	kvs_lid *lids; /* by listener id */
	uint32_t n_lids;
	/* Stats: written by the committing thread only; other threads read
	 * them as plain aligned words, a benign race for figures. */
	uint64_t commits, truncated, map_growths, log_records;
};

void
kvs_entry_put(uint8_t *p, uint64_t ext, uint64_t seq, uint8_t tiers)
{
	kvi_put_le64(p, ext);
	kvi_put_le64(p + 8, seq);
	p[16] = tiers;
}

void
kvs_entry_get(const uint8_t *p, uint64_t *ext, uint64_t *seq, uint8_t *tiers)
{
	*ext = kvi_get_le64(p);
	*seq = kvi_get_le64(p + 8);
	*tiers = p[16];
}

/* ---- live listeners ------------------------------------------------ */

/* lid_at returns lid's entry, growing the table as needed. */
static kvs_lid *
lid_at(kvs_store *s, uint32_t lid)
{
	if (lid >= s->n_lids) {
		uint32_t n = s->n_lids ? s->n_lids : 64;
		while (n <= lid) {
			n *= 2;
		}
		s->lids = kvi_reallocarray(s->lids, n, sizeof(kvs_lid));
		for (uint32_t i = s->n_lids; i < n; i++) {
			s->lids[i] = (kvs_lid){.need = KVS_NONE};
		}
		s->n_lids = n;
	}
	return &s->lids[lid];
}

static bool
lid_live(const kvs_store *s, uint32_t lid)
{
	return lid < s->n_lids && s->lids[lid].live;
}

/* truncation_point returns the lsn below which no live listener needs
 * the log, given the listener table lids. */
static uint64_t
truncation_point(const kvs_store *s, const kvs_lid *lids)
{
	uint64_t t = s->next_lsn;
	for (uint32_t i = 0; i < s->n_lids; i++) {
		if (lids[i].live && lids[i].need < t) {
			t = lids[i].need;
		}
	}
	return t;
}

/* ---- open ---------------------------------------------------------- */

static kvi_err
open_dbs(kvs_store *s, char *err, size_t errlen)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc != 0) {
		return kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb: %s",
				mdb_strerror(rc));
	}
	if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta)) != 0 ||
	    (rc = mdb_dbi_open(txn, "log", MDB_CREATE, &s->log)) != 0 ||
	    (rc = mdb_dbi_open(txn, "snap", MDB_CREATE, &s->snap)) != 0 ||
	    (rc = mdb_dbi_open(txn, "listeners", MDB_CREATE, &s->listeners)) !=
		0) {
		goto fail;
	}
	MDB_val k = {6, "format"}, v;
	rc = mdb_get(txn, s->meta, &k, &v);
	if (rc == MDB_NOTFOUND) {
		uint8_t f[4];
		kvi_put_le32(f, KVS_FORMAT);
		v = (MDB_val){4, f};
		rc = mdb_put(txn, s->meta, &k, &v, 0);
	} else if (rc == 0 &&
		   (v.mv_size != 4 || kvi_get_le32(v.mv_data) != KVS_FORMAT)) {
		mdb_txn_abort(txn);
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"store format %u, this build reads %u",
				v.mv_size == 4 ? kvi_get_le32(v.mv_data) : 0,
				KVS_FORMAT);
	}
	if (rc != 0) {
		goto fail;
	}
	k = (MDB_val){8, "next_lsn"};
	rc = mdb_get(txn, s->meta, &k, &v);
	if (rc == 0 && v.mv_size == 8) {
		s->next_lsn = kvi_get_le64(v.mv_data);
	} else if (rc != MDB_NOTFOUND) {
		rc = rc == 0 ? MDB_CORRUPTED : rc;
		goto fail;
	}
	MDB_stat ms;
	if ((rc = mdb_stat(txn, s->log, &ms)) != 0) {
		goto fail;
	}
	s->log_records = ms.ms_entries;
	if ((rc = mdb_txn_commit(txn)) != 0) {
		return kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb: %s",
				mdb_strerror(rc));
	}
	return KVI_OK;
fail:
	mdb_txn_abort(txn);
	return kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb: %s",
			mdb_strerror(rc));
}

kvi_err
kvs_store_open(const kvs_store_opts *o, kvs_store **out, char *err,
	       size_t errlen)
{
	if (mkdir(o->dir, 0755) != 0 && errno != EEXIST) {
		return kvi_errf(err, errlen, KVI_EIO, "mkdir %s: %s", o->dir,
				strerror(errno));
	}
	kvs_store *s = kvi_calloc(1, sizeof(*s));
	s->dir = kvi_strdup(o->dir);
	s->map_size = o->map_size ? o->map_size : KVS_DEFAULT_MAPSIZE;
	s->max_map_size = o->max_map_size;
	if (s->max_map_size != 0 && s->map_size > s->max_map_size) {
		s->map_size = s->max_map_size;
	}
	int rc = mdb_env_create(&s->env);
	if (rc == 0) {
		mdb_env_set_maxdbs(s->env, 4);
		rc = mdb_env_set_mapsize(s->env, s->map_size);
	}
	unsigned flags = MDB_NOTLS | (o->no_sync ? MDB_NOSYNC : MDB_NOMETASYNC);
	if (rc == 0) {
		rc = mdb_env_open(s->env, o->dir, flags, 0644);
	}
	if (rc != 0) {
		kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb open %s: %s",
			 o->dir, mdb_strerror(rc));
		kvs_store_close(s);
		return kvi_mdb_err(rc);
	}
	/* before any transaction: a file cut short faults on its first read */
	kvi_err rv = kvi_mdb_check_size(s->env, err, errlen);
	if (rv != KVI_OK) {
		kvs_store_close(s);
		return rv;
	}
	MDB_envinfo info;
	mdb_env_info(s->env, &info);
	s->map_size = info.me_mapsize; /* an existing file may be larger */
	rv = open_dbs(s, err, errlen);
	if (rv != KVI_OK) {
		kvs_store_close(s);
		return rv;
	}
	*out = s;
	return KVI_OK;
}

void
kvs_store_close(kvs_store *s)
{
	if (s == NULL) {
		return;
	}
	if (s->env != NULL) {
		mdb_env_close(s->env);
	}
	kvi_free(s->lids);
	kvi_free(s->dir);
	kvi_free(s);
}

void
kvs_store_stamp(kvs_store *s, kvs_stamp *out)
{
	MDB_envinfo info;
	mdb_env_info(s->env, &info);
	char path[4096];
	snprintf(path, sizeof(path), "%s/data.mdb", s->dir);
	struct stat st;
	memset(out, 0, sizeof(*out));
	if (stat(path, &st) == 0) {
		out->v[0] = (uint64_t)st.st_dev;
		out->v[1] = (uint64_t)st.st_ino;
	}
	out->v[2] = (uint64_t)info.me_last_txnid;
	out->v[3] = s->next_lsn;
	out->v[4] = s->log_records;
}

uint64_t
kvs_stamp_lsn(const kvs_stamp *st)
{
	return st->v[3];
}

bool
kvs_stamp_before(const kvs_stamp *then, const kvs_stamp *now)
{
	/* a transaction id and an lsn only grow in one file */
	return then->v[0] == now->v[0] && then->v[1] == now->v[1] &&
	       then->v[2] < now->v[2] && then->v[3] <= now->v[3];
}

const char *
kvs_store_dir(const kvs_store *s)
{
	return s->dir;
}

/* ---- load ---------------------------------------------------------- */

static kvi_err
load_listeners(kvs_store *s, MDB_txn *txn, const kvs_load_cb *cb, char *err,
	       size_t errlen)
{
	MDB_cursor *c;
	MDB_val k, v;
	mdb_cursor_open(txn, s->listeners, &c);
	int rc;
	kvi_err rv = KVI_OK;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 4) {
			rv = kvi_errf(err, errlen, KVI_ECORRUPT,
				      "listener key of %zu bytes", k.mv_size);
			break;
		}
		uint32_t lid = kvi_get_be32(k.mv_data);
		*lid_at(s, lid) = (kvs_lid){.live = true, .need = KVS_NONE};
		if ((rv = cb->listener(cb->arg, lid, v.mv_data, v.mv_size)) !=
		    KVI_OK) {
			kvi_errf(err, errlen, rv,
				 "listener %u: its assignment does not load "
				 "(%s)",
				 lid, kvi_strerror(rv));
			break;
		}
	}
	mdb_cursor_close(c);
	if (rv == KVI_OK && rc != MDB_NOTFOUND) {
		rv = kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb: %s",
			      mdb_strerror(rc));
	}
	return rv;
}

static kvi_err
load_snap_header(kvs_store *s, const kvs_load_cb *cb, uint32_t lid,
		 const MDB_val *v, char *err, size_t errlen)
{
	const uint8_t *p = v->mv_data;
	if (v->mv_size != KVS_HEADER_LEN ||
	    !kvi_sealed(v->mv_data, v->mv_size) ||
	    kvi_get_le32(p + 4) != KVS_FORMAT) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"listener %u: bad snapshot header", lid);
	}
	kvs_mark mark;
	if (!kvs_mark_from_flags(p[16], &mark)) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"listener %u: bad snapshot header", lid);
	}
	uint64_t lsn = kvi_get_le64(p + 8);
	lid_at(s, lid)->snap_lsn = lsn;
	mark.wm = kvi_get_le64(p + 17);
	mark.fp = kvi_get_le64(p + 25);
	kvi_err rv =
	    cb->snapshot(cb->arg, lid, &mark, lsn, kvi_get_le64(p + 33));
	if (rv != KVI_OK && rv != KVI_ENOENT) {
		kvi_errf(err, errlen, rv,
			 "listener %u: its snapshot does not load (%s)", lid,
			 kvi_strerror(rv));
	}
	return rv;
}

static kvi_err
load_snaps(kvs_store *s, MDB_txn *txn, const kvs_load_cb *cb, char *err,
	   size_t errlen)
{
	MDB_cursor *c;
	MDB_val k, v;
	mdb_cursor_open(txn, s->snap, &c);
	int rc;
	kvi_err rv = KVI_OK;
	uint32_t skip = UINT32_MAX; /* a listener whose entries are not read */
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0 && rv == KVI_OK;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8) {
			rv = kvi_errf(err, errlen, KVI_ECORRUPT,
				      "snapshot key of %zu bytes", k.mv_size);
			break;
		}
		uint32_t lid = kvi_get_be32(k.mv_data);
		uint32_t chunk = kvi_get_be32((uint8_t *)k.mv_data + 4);
		if (!lid_live(s, lid)) {
			continue; /* a deleted listener's leftovers */
		}
		if (chunk == 0) {
			rv = load_snap_header(s, cb, lid, &v, err, errlen);
			skip = rv == KVI_ENOENT ? lid : UINT32_MAX;
			rv = rv == KVI_ENOENT ? KVI_OK : rv;
		} else if (cb->entries == NULL || lid == skip) {
			continue; /* the caller has them already */
		} else if (!kvi_sealed(v.mv_data, v.mv_size) ||
			   (v.mv_size - 4) % KVS_ENTRY_SIZE != 0) {
			rv = kvi_errf(err, errlen, KVI_ECORRUPT,
				      "listener %u: bad snapshot chunk %u", lid,
				      chunk);
		} else if ((rv = cb->entries(
				cb->arg, lid, (const uint8_t *)v.mv_data + 4,
				(v.mv_size - 4) / KVS_ENTRY_SIZE)) != KVI_OK) {
			kvi_errf(err, errlen, rv,
				 "listener %u: snapshot chunk %u does not load "
				 "(%s)",
				 lid, chunk, kvi_strerror(rv));
		}
	}
	mdb_cursor_close(c);
	if (rv == KVI_OK && rc != MDB_NOTFOUND) {
		rv = kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb: %s",
			      mdb_strerror(rc));
	}
	return rv;
}

static kvi_err
load_log(kvs_store *s, MDB_txn *txn, const kvs_load_cb *cb, char *err,
	 size_t errlen)
{
	MDB_cursor *c;
	MDB_val k, v;
	mdb_cursor_open(txn, s->log, &c);
	int rc;
	kvi_err rv = KVI_OK;
	/* The log holds only what some listener needed at the last commit:
	 * read it all. */
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0 && rv == KVI_OK;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || v.mv_size < 8 ||
		    !kvi_sealed(v.mv_data, v.mv_size)) {
			uint64_t lsn =
			    k.mv_size == 8 ? kvi_get_be64(k.mv_data) : 0;
			rv = kvi_errf(err, errlen, KVI_ECORRUPT,
				      "log record %llu: bad checksum or size",
				      (unsigned long long)lsn);
			break;
		}
		uint64_t lsn = kvi_get_be64(k.mv_data);
		const uint8_t *p = v.mv_data;
		uint32_t lid = kvi_get_le32(p + 4);
		if (!lid_live(s, lid) || lsn < s->lids[lid].snap_lsn) {
			continue;
		}
		if (s->lids[lid].need == KVS_NONE) {
			s->lids[lid].need = lsn;
		}
		rv = cb->record(cb->arg, lid, lsn, p + 8, v.mv_size - 8);
		if (rv != KVI_OK) {
			kvi_errf(err, errlen, rv,
				 "log record %llu of listener %u does not load "
				 "(%s)",
				 (unsigned long long)lsn, lid,
				 kvi_strerror(rv));
		}
	}
	mdb_cursor_close(c);
	if (rv == KVI_OK && rc != MDB_NOTFOUND) {
		rv = kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb: %s",
			      mdb_strerror(rc));
	}
	return rv;
}

kvi_err
kvs_store_load(kvs_store *s, const kvs_load_cb *cb, char *err, size_t errlen)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
	if (rc != 0) {
		return kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb: %s",
				mdb_strerror(rc));
	}
	kvi_err rv = load_listeners(s, txn, cb, err, errlen);
	if (rv == KVI_OK) {
		rv = load_snaps(s, txn, cb, err, errlen);
	}
	if (rv == KVI_OK) {
		rv = load_log(s, txn, cb, err, errlen);
	}
	mdb_txn_abort(txn);
	return rv;
}

/* ---- marks --------------------------------------------------------- */

uint8_t
kvs_mark_flags(const kvs_mark *m)
{
	return (uint8_t)((m->has_wm ? 1 : 0) | (m->has_fp ? 2 : 0) |
			 (m->incomplete ? 4 : 0));
}

bool
kvs_mark_from_flags(uint8_t flags, kvs_mark *m)
{
	if (flags > 7) {
		return false;
	}
	*m = (kvs_mark){.has_wm = (flags & 1) != 0,
			.has_fp = (flags & 2) != 0,
			.incomplete = (flags & 4) != 0};
	return true;
}

/* ---- commit -------------------------------------------------------- */

/* kvs_del_prefix deletes every snap key of lid. Re-seeks after each
 * deletion rather than trusting the cursor's position past a delete. */
static int
del_snapshot(kvs_store *s, MDB_txn *txn, uint32_t lid)
{
	MDB_cursor *c;
	uint8_t key[8];
	kvi_put_be32(key, lid);
	kvi_put_be32(key + 4, 0);
	int rc = mdb_cursor_open(txn, s->snap, &c);
	while (rc == 0) {
		MDB_val k = {8, key}, v;
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (rc != 0 || kvi_get_be32(k.mv_data) != lid) {
			break;
		}
		rc = mdb_cursor_del(c, 0);
	}
	if (c != NULL) {
		mdb_cursor_close(c);
	}
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int
put_snapshot(kvs_store *s, MDB_txn *txn, const kvs_snap *sn)
{
	int rc = del_snapshot(s, txn, sn->lid);
	uint32_t chunks =
	    (uint32_t)((sn->n + KVS_CHUNK_ENTRIES - 1) / KVS_CHUNK_ENTRIES);
	uint8_t key[8], hdr[KVS_HEADER_LEN];
	kvi_put_be32(key, sn->lid);
	kvi_put_be32(key + 4, 0);
	kvi_put_le32(hdr + 4, KVS_FORMAT);
	kvi_put_le64(hdr + 8, s->next_lsn);
	hdr[16] = kvs_mark_flags(&sn->mark);
	kvi_put_le64(hdr + 17, sn->mark.has_wm ? sn->mark.wm : 0);
	kvi_put_le64(hdr + 25, sn->mark.has_fp ? sn->mark.fp : 0);
	kvi_put_le64(hdr + 33, sn->n);
	kvi_put_le32(hdr + 41, chunks);
	kvi_seal(hdr, sizeof(hdr));
	MDB_val k = {8, key}, v = {sizeof(hdr), hdr};
	if (rc == 0) {
		rc = mdb_put(txn, s->snap, &k, &v, 0);
	}
	for (uint32_t c = 0; rc == 0 && c < chunks; c++) {
		size_t first = (size_t)c * KVS_CHUNK_ENTRIES;
		size_t n = sn->n - first < KVS_CHUNK_ENTRIES
			       ? sn->n - first
			       : KVS_CHUNK_ENTRIES;
		kvi_put_be32(key + 4, c + 1);
		v = (MDB_val){4 + n * KVS_ENTRY_SIZE, NULL};
		if ((rc = mdb_put(txn, s->snap, &k, &v, MDB_RESERVE)) != 0) {
			break;
		}
		memcpy((uint8_t *)v.mv_data + 4,
		       sn->entries + first * KVS_ENTRY_SIZE,
		       n * KVS_ENTRY_SIZE);
		kvi_seal(v.mv_data, v.mv_size);
	}
	return rc;
}

static int
put_record(kvs_store *s, MDB_txn *txn, const kvs_rec *r)
{
	uint8_t key[8];
	kvi_put_be64(key, s->next_lsn);
	MDB_val k = {8, key}, v = {8 + r->len, NULL};
	int rc = mdb_put(txn, s->log, &k, &v, MDB_APPEND | MDB_RESERVE);
	if (rc != 0) {
		return rc;
	}
	uint8_t *p = v.mv_data;
	kvi_put_le32(p + 4, r->lid);
	memcpy(p + 8, r->payload, r->len);
	kvi_seal(p, v.mv_size);
	s->next_lsn++;
	s->log_records++;
	return 0;
}

/* truncate_log deletes up to KVS_TRUNCATE_MAX log records below lsn below;
 * *n counts them. */
static int
truncate_log(kvs_store *s, MDB_txn *txn, uint64_t below, uint64_t *n)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, s->log, &c);
	*n = 0;
	while (rc == 0 && *n < KVS_TRUNCATE_MAX) {
		MDB_val k, v;
		rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
		if (rc != 0 || kvi_get_be64(k.mv_data) >= below) {
			break;
		}
		if ((rc = mdb_cursor_del(c, 0)) == 0) {
			(*n)++;
		}
	}
	if (c != NULL) {
		mdb_cursor_close(c);
	}
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static int
apply_puts(kvs_store *s, MDB_txn *txn, const kvs_commit *c)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < c->n_puts; i++) {
		uint8_t key[4];
		kvi_put_be32(key, c->puts[i].lid);
		MDB_val k = {4, key},
			v = {c->puts[i].len, (void *)c->puts[i].val};
		if (c->puts[i].val != NULL) {
			rc = mdb_put(txn, s->listeners, &k, &v, 0);
			continue;
		}
		rc = mdb_del(txn, s->listeners, &k, NULL);
		rc = rc == MDB_NOTFOUND ? 0 : rc;
		if (rc == 0) {
			rc = del_snapshot(s, txn, c->puts[i].lid);
		}
	}
	return rc;
}

/* next_lids writes into lids[] the listener table as it will be once
 * c's puts apply. */
static void
next_lids(const kvs_store *s, const kvs_commit *c, kvs_lid *lids)
{
	memcpy(lids, s->lids, s->n_lids * sizeof(kvs_lid));
	for (size_t i = 0; i < c->n_puts; i++) {
		kvs_lid *l = &lids[c->puts[i].lid];
		if (c->puts[i].val == NULL) {
			*l = (kvs_lid){.need = KVS_NONE};
		} else if (!l->live) {
			*l = (kvs_lid){.live = true, .need = KVS_NONE};
		}
	}
}

/* commit_once runs c in one transaction; the listener table changes
 * only once it has committed. Records and snapshots of listeners that are
 * not live once c's puts apply are dropped. */
static int
commit_once(kvs_store *s, const kvs_commit *c)
{
	uint64_t lsn0 = s->next_lsn, records0 = s->log_records;
	kvs_lid *lids = kvi_malloc(s->n_lids * sizeof(kvs_lid) + 1);
	next_lids(s, c, lids);
	MDB_txn *txn;
	int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc != 0) {
		kvi_free(lids);
		return rc;
	}
	rc = apply_puts(s, txn, c);
	for (size_t i = 0; rc == 0 && i < c->n_snaps; i++) {
		if (lids[c->snaps[i].lid].live) {
			lids[c->snaps[i].lid].need = KVS_NONE;
			rc = put_snapshot(s, txn, &c->snaps[i]);
		}
	}
	for (size_t i = 0; rc == 0 && i < c->n_recs; i++) {
		kvs_lid *l = &lids[c->recs[i].lid];
		if (!l->live) {
			continue;
		}
		if (l->need == KVS_NONE) {
			l->need = s->next_lsn;
		}
		rc = put_record(s, txn, &c->recs[i]);
	}
	if (rc == 0) {
		uint8_t next[8];
		kvi_put_le64(next, s->next_lsn);
		MDB_val k = {8, "next_lsn"}, v = {8, next};
		rc = mdb_put(txn, s->meta, &k, &v, 0);
	}
	uint64_t dropped = 0;
	if (rc == 0) {
		rc = truncate_log(s, txn, truncation_point(s, lids), &dropped);
	}
	rc = rc == 0 ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), rc);
	if (rc == 0) {
		memcpy(s->lids, lids, s->n_lids * sizeof(kvs_lid));
		s->log_records -= dropped;
		s->truncated += dropped;
	} else {
		s->next_lsn = lsn0;
		s->log_records = records0;
	}
	kvi_free(lids);
	return rc;
}

/* commit_failed says why a commit failed with rc. LMDB reports a
 * short write - what a full disk gives - as EIO: with next to nothing free
 * on the store's filesystem, that is a full disk. */
static kvi_err
commit_failed(kvs_store *s, int rc, char *err, size_t errlen)
{
	kvi_err rv = kvi_mdb_err(rc);
	struct statvfs fs;
	if (statvfs(s->dir, &fs) != 0) {
		return kvi_errf(err, errlen, rv, "lmdb commit: %s",
				mdb_strerror(rc));
	}
	uint64_t avail = (uint64_t)fs.f_bavail * fs.f_frsize;
	if (rv == KVI_EFULL || (rv == KVI_EIO && avail < KVS_DISK_LOW)) {
		return kvi_errf(err, errlen, KVI_EFULL,
				"disk full: %s, %" PRIu64
				" bytes free on the store's filesystem",
				mdb_strerror(rc), avail);
	}
	return kvi_errf(err, errlen, rv, "lmdb commit: %s", mdb_strerror(rc));
}

kvi_err
kvs_store_commit(kvs_store *s, const kvs_commit *c, char *err, size_t errlen)
{
	/* Room in the listener table for every lid c names. */
	for (size_t i = 0; i < c->n_puts; i++) {
		lid_at(s, c->puts[i].lid);
	}
	for (size_t i = 0; i < c->n_recs; i++) {
		lid_at(s, c->recs[i].lid);
	}
	for (size_t i = 0; i < c->n_snaps; i++) {
		lid_at(s, c->snaps[i].lid);
	}
	for (int attempt = 0; attempt < KVS_COMMIT_TRIES; attempt++) {
		int rc = commit_once(s, c);
		if (rc == 0) {
			s->commits++;
			return KVI_OK;
		}
		if (rc != MDB_MAP_FULL) {
			return commit_failed(s, rc, err, errlen);
		}
		if (kvi_mdb_grow(s->env, &s->map_size, s->max_map_size) != 0) {
			return kvi_errf(
			    err, errlen, KVI_EFULL,
			    "store full: the map reached its limit of "
			    "%zu bytes",
			    s->map_size);
		}
		s->map_growths++;
	}
	return kvi_errf(err, errlen, KVI_EFULL, "store full after %d growths",
			KVS_COMMIT_TRIES);
}

/* ---- stats and recovery -------------------------------------------- */

void
kvs_store_stats_get(kvs_store *s, kvs_store_stats *out)
{
	memset(out, 0, sizeof(*out));
	char path[4096];
	snprintf(path, sizeof(path), "%s/data.mdb", s->dir);
	struct stat st;
	if (stat(path, &st) == 0) {
		out->file_bytes = (uint64_t)st.st_size;
	}
	out->log_records = s->log_records;
	out->map_bytes = s->map_size;
	out->next_lsn = s->next_lsn;
	out->commits = s->commits;
	out->truncated = s->truncated;
	out->map_growths = s->map_growths;
}

bool
kvs_store_oldest(const kvs_store *s, uint32_t *lid, uint64_t *need)
{
	bool found = false;
	for (uint32_t i = 0; i < s->n_lids; i++) {
		if (s->lids[i].live && s->lids[i].need != KVS_NONE &&
		    (!found || s->lids[i].need < *need)) {
			*lid = i;
			*need = s->lids[i].need;
			found = true;
		}
	}
	return found;
}
