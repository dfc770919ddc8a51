#include "cstore.h"

#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "bytes.h"
#include "lmdb_util.h"
#include "log.h"

#define KVC_CS_FORMAT  1u
#define KVC_CS_MAPSIZE ((size_t)16 << 20)
#define KVC_CS_GROWTHS 8
/* less free than this on the filesystem, and an I/O error is a full disk
 * (shard/store/store.c does the same) */
#define KVC_CS_DISK_LOW ((uint64_t)4 << 20)

struct kvc_cstore {
	pthread_mutex_t mu;
	MDB_env *env;
	MDB_dbi meta, pods, pins, shards, drains;
	size_t map_size;
	char *dir;
	/* whether the last write failed, and why (kvc_cstore_failing);
	 * under health_mu, so that /ready does not wait for a write */
	pthread_mutex_t health_mu;
	bool failing, full;
	char why[256];
};

static kvi_err
cs_mdb_fail(char *err, size_t errlen, int rc, const char *what)
{
	return kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb %s: %s", what,
			mdb_strerror(rc));
}

/* cs_mkdirs creates dir and its missing parents. */
static kvi_err
cs_mkdirs(const char *dir, char *err, size_t errlen)
{
	char path[4096];
	size_t n = strlen(dir);
	if (n == 0 || n >= sizeof(path)) {
		return kvi_errf(err, errlen, KVI_EINVAL,
				"data dir path is empty or too long");
	}
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0') {
			continue;
		}
		char c = path[i];
		path[i] = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST) {
			return kvi_errf(err, errlen, KVI_EIO, "mkdir %s: %s",
					path, strerror(errno));
		}
		path[i] = c;
	}
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		return kvi_errf(err, errlen, KVI_EIO, "%s is not a directory",
				dir);
	}
	return KVI_OK;
}

/* cs_init_dbs opens the tables and checks or writes the format. */
static kvi_err
cs_init_dbs(kvc_cstore *s, char *err, size_t errlen)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc != 0) {
		return cs_mdb_fail(err, errlen, rc, "begin");
	}
	if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta)) != 0 ||
	    (rc = mdb_dbi_open(txn, "pods", MDB_CREATE, &s->pods)) != 0 ||
	    (rc = mdb_dbi_open(txn, "pins", MDB_CREATE, &s->pins)) != 0 ||
	    (rc = mdb_dbi_open(txn, "shards", MDB_CREATE, &s->shards)) != 0 ||
	    (rc = mdb_dbi_open(txn, "drains", MDB_CREATE, &s->drains)) != 0) {
		goto fail;
	}
	uint8_t fresh[4];
	MDB_val k = {6, "format"}, v;
	rc = mdb_get(txn, s->meta, &k, &v);
	if (rc == MDB_NOTFOUND) {
		kvi_put_le32(fresh, KVC_CS_FORMAT);
		v = (MDB_val){sizeof(fresh), fresh};
		rc = mdb_put(txn, s->meta, &k, &v, 0);
	}
	if (rc != 0) {
		goto fail;
	}
	if (v.mv_size != 4 || kvi_get_le32(v.mv_data) == 0) {
		mdb_txn_abort(txn);
		return kvi_errf(err, errlen, KVI_ECORRUPT, "bad format record");
	}
	uint32_t fmt = kvi_get_le32(v.mv_data);
	if (fmt > KVC_CS_FORMAT) {
		mdb_txn_abort(txn);
		return kvi_errf(err, errlen, KVI_EVERSION,
				"store format %u is newer than %u", fmt,
				KVC_CS_FORMAT);
	}
	if ((rc = mdb_txn_commit(txn)) != 0) {
		return cs_mdb_fail(err, errlen, rc, "commit");
	}
	return KVI_OK;
fail:
	mdb_txn_abort(txn);
	return cs_mdb_fail(err, errlen, rc, "open tables");
}

kvi_err
kvc_cstore_open(const char *dir, kvc_cstore **out, char *err, size_t errlen)
{
	kvi_err rv = cs_mkdirs(dir, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	kvc_cstore *s = kvi_calloc(1, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->health_mu, NULL);
	s->dir = kvi_strdup(dir);
	s->map_size = KVC_CS_MAPSIZE;
	int rc = mdb_env_create(&s->env);
	if (rc != 0) {
		s->env = NULL;
		rv = cs_mdb_fail(err, errlen, rc, "create");
		goto fail;
	}
	if ((rc = mdb_env_set_maxdbs(s->env, 5)) != 0 ||
	    (rc = mdb_env_set_mapsize(s->env, s->map_size)) != 0 ||
	    (rc = mdb_env_open(s->env, dir, 0, 0644)) != 0) {
		rv = kvi_errf(err, errlen, kvi_mdb_err(rc), "lmdb open %s: %s",
			      dir, mdb_strerror(rc));
		goto fail;
	}
	/* before any transaction: a file cut short faults on its first read */
	if ((rv = kvi_mdb_check_size(s->env, err, errlen)) != KVI_OK) {
		goto fail;
	}
	MDB_envinfo info;
	mdb_env_info(s->env, &info);
	if (info.me_mapsize > s->map_size) {
		s->map_size = info.me_mapsize; /* grown by an earlier run */
	}
	if ((rv = cs_init_dbs(s, err, errlen)) != KVI_OK) {
		goto fail;
	}
	*out = s;
	return KVI_OK;
fail:
	kvc_cstore_close(s);
	return rv;
}

void
kvc_cstore_close(kvc_cstore *s)
{
	if (s == NULL) {
		return;
	}
	if (s->env != NULL) {
		mdb_env_close(s->env);
	}
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->health_mu);
	kvi_free(s->dir);
	kvi_free(s);
}

static kvi_err
cs_check_key(const char *what, const char *key, char *err, size_t errlen)
{
	size_t n = key != NULL ? strlen(key) : 0;
	if (n == 0 || n > KVC_CSTORE_KEY_MAX) {
		return kvi_errf(err, errlen, KVI_EINVAL,
				"%s must be 1..%d bytes", what,
				KVC_CSTORE_KEY_MAX);
	}
	return KVI_OK;
}

/* cs_free_bytes returns what the store's filesystem has free for us,
 * or UINT64_MAX when it cannot be told. */
static uint64_t
cs_free_bytes(const kvc_cstore *s)
{
	struct statvfs fs;
	if (statvfs(s->dir, &fs) != 0) {
		return UINT64_MAX;
	}
	return (uint64_t)fs.f_bavail * fs.f_frsize;
}

/* cs_failed says why a write failed with rc, and records it: LMDB
 * reports a short write as EIO, which is a full disk when the filesystem
 * has next to nothing free. */
static kvi_err
cs_failed(kvc_cstore *s, int rc, char *err, size_t errlen)
{
	kvi_err rv = kvi_mdb_err(rc);
	uint64_t avail = cs_free_bytes(s);
	bool full = rc == ENOSPC || rc == EDQUOT ||
		    (rv == KVI_EIO && avail < KVC_CS_DISK_LOW);
	char why[256];
	if (full) {
		snprintf(why, sizeof(why),
			 "disk full: %s, %" PRIu64
			 " bytes free on the store's filesystem (%s)",
			 mdb_strerror(rc), avail, s->dir);
	} else {
		snprintf(why, sizeof(why), "lmdb write: %s", mdb_strerror(rc));
	}
	pthread_mutex_lock(&s->health_mu);
	s->failing = true;
	s->full = full;
	snprintf(s->why, sizeof(s->why), "%s", why);
	pthread_mutex_unlock(&s->health_mu);
	return kvi_errf(err, errlen, full ? KVI_EFULL : rv, "%s", why);
}

/* cs_committed records a write that went through: the store commits
 * again, unless it failed for a full disk and the disk has still next to
 * nothing free (a small write may fit in pages LMDB frees and reuses,
 * the next one not). */
static void
cs_committed(kvc_cstore *s)
{
	pthread_mutex_lock(&s->health_mu);
	bool full = s->failing && s->full;
	if (!full) {
		s->failing = false;
	}
	pthread_mutex_unlock(&s->health_mu);
	if (full && cs_free_bytes(s) >= KVC_CS_DISK_LOW) {
		pthread_mutex_lock(&s->health_mu);
		s->failing = false;
		pthread_mutex_unlock(&s->health_mu);
	}
}

/* cs_write_many puts vals[i] (sealed already) under keys[i] in dbi,
 * or deletes keys[i] when vals[i] is NULL, all in one write transaction:
 * one sync for them all. A full map is grown and the write retried. */
static kvi_err
cs_write_many(kvc_cstore *s, MDB_dbi dbi, const char *const *keys,
	      const uint8_t *const *vals, const size_t *lens, size_t n,
	      char *err, size_t errlen)
{
	pthread_mutex_lock(&s->mu);
	kvi_err rv = KVI_OK;
	for (int tries = 0;; tries++) {
		MDB_txn *txn = NULL;
		int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
		size_t i = 0;
		for (; rc == 0 && i < n; i += rc == 0) {
			MDB_val k = {strlen(keys[i]), (void *)keys[i]};
			MDB_val v = {lens[i], (void *)vals[i]};
			rc = vals[i] != NULL ? mdb_put(txn, dbi, &k, &v, 0)
					     : mdb_del(txn, dbi, &k, NULL);
		}
		if (txn != NULL) {
			rc = rc == 0 ? mdb_txn_commit(txn)
				     : (mdb_txn_abort(txn), rc);
		}
		if (rc == MDB_MAP_FULL && tries < KVC_CS_GROWTHS &&
		    kvi_mdb_grow(s->env, &s->map_size, 0) == 0) {
			continue;
		}
		if (rc == MDB_NOTFOUND) {
			rv = kvi_errf(err, errlen, KVI_ENOENT,
				      "%s is not stored", keys[i]);
		} else if (rc != 0) {
			rv = cs_failed(s, rc, err, errlen);
		} else {
			cs_committed(s);
		}
		break;
	}
	pthread_mutex_unlock(&s->mu);
	return rv;
}

bool
kvc_cstore_failing(kvc_cstore *s, char *why, size_t len)
{
	pthread_mutex_lock(&s->health_mu);
	bool failing = s->failing;
	if (failing && why != NULL) {
		snprintf(why, len, "%s", s->why);
	}
	pthread_mutex_unlock(&s->health_mu);
	return failing;
}

void
kvc_cstore_probe(kvc_cstore *s)
{
	if (!kvc_cstore_failing(s, NULL, 0)) {
		return;
	}
	uint8_t now[8];
	kvi_put_le64(now, (uint64_t)time(NULL));
	const char *key = "probe";
	const uint8_t *val = now;
	size_t len = sizeof(now);
	char err[256];
	cs_write_many(s, s->meta, &key, &val, &len, 1, err, sizeof(err));
}

/* cs_write puts val (sealed already) under key in dbi, or deletes key
 * when val is NULL, in one write transaction. */
static kvi_err
cs_write(kvc_cstore *s, MDB_dbi dbi, const char *key, const uint8_t *val,
	 size_t len, char *err, size_t errlen)
{
	return cs_write_many(s, dbi, &key, &val, &len, 1, err, errlen);
}

/* kvc_cs_visit_fn receives one entry of a listing: its key, NUL-terminated,
 * and its value past the checksum, which was verified. */
typedef kvi_err (*kvc_cs_visit_fn)(void *ctx, const char *key,
				   const uint8_t *val, size_t len, char *err,
				   size_t errlen);

static kvi_err
cs_list(kvc_cstore *s, MDB_dbi dbi, kvc_cs_visit_fn visit, void *ctx, char *err,
	size_t errlen)
{
	pthread_mutex_lock(&s->mu);
	MDB_txn *txn = NULL;
	MDB_cursor *c = NULL;
	kvi_err rv = KVI_OK;
	int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
	if (rc == 0) {
		rc = mdb_cursor_open(txn, dbi, &c);
	}
	if (rc != 0) {
		rv = cs_mdb_fail(err, errlen, rc, "read");
		goto out;
	}
	MDB_val k, v;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		char key[KVC_CSTORE_KEY_MAX + 1];
		if (k.mv_size == 0 || k.mv_size > KVC_CSTORE_KEY_MAX ||
		    memchr(k.mv_data, '\0', k.mv_size) != NULL) {
			rv = kvi_errf(err, errlen, KVI_ECORRUPT,
				      "malformed key of %zu bytes", k.mv_size);
			goto out;
		}
		memcpy(key, k.mv_data, k.mv_size);
		key[k.mv_size] = '\0';
		if (!kvi_sealed(v.mv_data, v.mv_size)) {
			rv = kvi_errf(err, errlen, KVI_ECORRUPT,
				      "bad checksum for %s", key);
			goto out;
		}
		rv = visit(ctx, key, (const uint8_t *)v.mv_data + 4,
			   v.mv_size - 4, err, errlen);
		if (rv != KVI_OK) {
			goto out;
		}
	}
	if (rc != MDB_NOTFOUND) {
		rv = cs_mdb_fail(err, errlen, rc, "read");
	}
out:
	if (c != NULL) {
		mdb_cursor_close(c);
	}
	if (txn != NULL) {
		mdb_txn_abort(txn);
	}
	pthread_mutex_unlock(&s->mu);
	return rv;
}

/* Pod records (their encoding is cstore_pod.c's). */

/* cs_pod_value encodes p and its key into key; NULL (with err) when
 * one does not fit. */
static uint8_t *
cs_pod_value(const kvc_pod *p, char key[KVC_CSTORE_KEY_MAX + 1], size_t *len,
	     kvi_err *rv, char *err, size_t errlen)
{
	if (kvc_pod_key(p, key, KVC_CSTORE_KEY_MAX + 1) == NULL ||
	    key[0] == '\0') {
		*rv =
		    kvi_errf(err, errlen, KVI_EINVAL,
			     "pod key must be 1..%d bytes", KVC_CSTORE_KEY_MAX);
		return NULL;
	}
	uint8_t *val = kvc_pod_encode(p, len);
	if (val == NULL) {
		*rv = kvi_errf(err, errlen, KVI_EINVAL,
			       "a string of pod %s is longer than %d", key,
			       KVC_CSTORE_STR_MAX);
	}
	return val;
}

kvi_err
kvc_cstore_pod_put(kvc_cstore *s, const kvc_pod *p, char *err, size_t errlen)
{
	return kvc_cstore_pods_put(s, &p, 1, err, errlen);
}

kvi_err
kvc_cstore_pods_put(kvc_cstore *s, const kvc_pod *const *pods, size_t n,
		    char *err, size_t errlen)
{
	char(*keys)[KVC_CSTORE_KEY_MAX + 1] = kvi_calloc(n + 1, sizeof(*keys));
	const char **kp = kvi_calloc(n + 1, sizeof(*kp));
	uint8_t **vals = kvi_calloc(n + 1, sizeof(*vals));
	size_t *lens = kvi_calloc(n + 1, sizeof(*lens));
	kvi_err rv = KVI_OK;
	size_t i = 0;
	for (; i < n && rv == KVI_OK; i++) {
		kp[i] = keys[i];
		vals[i] =
		    cs_pod_value(pods[i], keys[i], &lens[i], &rv, err, errlen);
	}
	if (rv == KVI_OK) {
		rv = cs_write_many(s, s->pods, kp, (const uint8_t *const *)vals,
				   lens, n, err, errlen);
	}
	for (size_t k = 0; k < i; k++) {
		kvi_free(vals[k]);
	}
	kvi_free(lens);
	kvi_free(vals);
	kvi_free(kp);
	kvi_free(keys);
	return rv;
}

kvi_err
kvc_cstore_pod_delete(kvc_cstore *s, const char *key, char *err, size_t errlen)
{
	kvi_err rv = cs_check_key("pod key", key, err, errlen);
	return rv != KVI_OK ? rv
			    : cs_write(s, s->pods, key, NULL, 0, err, errlen);
}

typedef struct kvc_cs_pod_ctx {
	kvc_cstore_pod_cb cb;
	void *arg;
} kvc_cs_pod_ctx;

static kvi_err
cs_visit_pod(void *ctx, const char *key, const uint8_t *val, size_t len,
	     char *err, size_t errlen)
{
	kvc_cs_pod_ctx *c = ctx;
	kvc_pod p;
	char why[128];
	kvi_err rv = kvc_pod_read(val, len, &p, why, sizeof(why));
	if (rv != KVI_OK) {
		return kvi_errf(err, errlen, rv, "%s (key %s)", why, key);
	}
	rv = c->cb(c->arg, key, &p);
	kvc_pod_fini(&p);
	return rv;
}

kvi_err
kvc_cstore_pod_list(kvc_cstore *s, kvc_cstore_pod_cb cb, void *arg, char *err,
		    size_t errlen)
{
	kvc_cs_pod_ctx c = {cb, arg};
	return cs_list(s, s->pods, cs_visit_pod, &c, err, errlen);
}

/* Pins, shards and drains: string values. */

static kvi_err
cs_put_pair(kvc_cstore *s, MDB_dbi dbi, const char *what, const char *key,
	    const char *value, char *err, size_t errlen)
{
	kvi_err rv = cs_check_key(what, key, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	size_t n = value != NULL ? strlen(value) : 0;
	if (n > KVC_CSTORE_STR_MAX) {
		return kvi_errf(err, errlen, KVI_EINVAL,
				"value for %s is longer than %d", key,
				KVC_CSTORE_STR_MAX);
	}
	uint8_t *val = kvi_malloc(4 + n);
	memcpy(val + 4, value != NULL ? value : "", n);
	kvi_seal(val, 4 + n);
	rv = cs_write(s, dbi, key, val, 4 + n, err, errlen);
	kvi_free(val);
	return rv;
}

static kvi_err
cs_delete(kvc_cstore *s, MDB_dbi dbi, const char *what, const char *key,
	  char *err, size_t errlen)
{
	kvi_err rv = cs_check_key(what, key, err, errlen);
	return rv != KVI_OK ? rv : cs_write(s, dbi, key, NULL, 0, err, errlen);
}

typedef struct kvc_cs_pair_ctx {
	kvc_cstore_pair_cb pair;
	kvc_cstore_key_cb key;
	void *arg;
} kvc_cs_pair_ctx;

static kvi_err
cs_visit_pair(void *ctx, const char *key, const uint8_t *val, size_t len,
	      char *err, size_t errlen)
{
	kvc_cs_pair_ctx *c = ctx;
	if (c->key != NULL) {
		if (len != 0) {
			return kvi_errf(err, errlen, KVI_ECORRUPT,
					"value of %s is not empty", key);
		}
		return c->key(c->arg, key);
	}
	if (len > KVC_CSTORE_STR_MAX || memchr(val, '\0', len) != NULL) {
		return kvi_errf(err, errlen, KVI_ECORRUPT,
				"malformed value for %s", key);
	}
	char *value = kvi_strndup((const char *)val, len);
	kvi_err rv = c->pair(c->arg, key, value);
	kvi_free(value);
	return rv;
}

kvi_err
kvc_cstore_pin_put(kvc_cstore *s, const char *listener_key,
		   const char *shard_id, char *err, size_t errlen)
{
	kvi_err rv = cs_check_key("shard id", shard_id, err, errlen);
	return rv != KVI_OK ? rv
			    : cs_put_pair(s, s->pins, "listener key",
					  listener_key, shard_id, err, errlen);
}

kvi_err
kvc_cstore_pin_delete(kvc_cstore *s, const char *listener_key, char *err,
		      size_t errlen)
{
	return cs_delete(s, s->pins, "listener key", listener_key, err, errlen);
}

kvi_err
kvc_cstore_pin_list(kvc_cstore *s, kvc_cstore_pair_cb cb, void *arg, char *err,
		    size_t errlen)
{
	kvc_cs_pair_ctx c = {cb, NULL, arg};
	return cs_list(s, s->pins, cs_visit_pair, &c, err, errlen);
}

kvi_err
kvc_cstore_shard_put(kvc_cstore *s, const char *shard_id, const char *endpoint,
		     char *err, size_t errlen)
{
	if (endpoint == NULL || endpoint[0] == '\0') {
		return kvi_errf(err, errlen, KVI_EINVAL,
				"shard endpoint is empty");
	}
	return cs_put_pair(s, s->shards, "shard id", shard_id, endpoint, err,
			   errlen);
}

kvi_err
kvc_cstore_shard_delete(kvc_cstore *s, const char *shard_id, char *err,
			size_t errlen)
{
	return cs_delete(s, s->shards, "shard id", shard_id, err, errlen);
}

kvi_err
kvc_cstore_shard_list(kvc_cstore *s, kvc_cstore_pair_cb cb, void *arg,
		      char *err, size_t errlen)
{
	kvc_cs_pair_ctx c = {cb, NULL, arg};
	return cs_list(s, s->shards, cs_visit_pair, &c, err, errlen);
}

kvi_err
kvc_cstore_drain_put(kvc_cstore *s, const char *shard_id, char *err,
		     size_t errlen)
{
	return cs_put_pair(s, s->drains, "shard id", shard_id, NULL, err,
			   errlen);
}

kvi_err
kvc_cstore_drain_delete(kvc_cstore *s, const char *shard_id, char *err,
			size_t errlen)
{
	return cs_delete(s, s->drains, "shard id", shard_id, err, errlen);
}

kvi_err
kvc_cstore_drain_list(kvc_cstore *s, kvc_cstore_key_cb cb, void *arg, char *err,
		      size_t errlen)
{
	kvc_cs_pair_ctx c = {NULL, cb, arg};
	return cs_list(s, s->drains, cs_visit_pair, &c, err, errlen);
}

/* ---- opening, or moving a damaged store aside --------------------- */

kvi_err
kvc_cstore_open_or_move(const char *dir, kvc_cstore **out)
{
	char err[512] = "", qdir[600], qerr[1100], qmoved[1100];
	kvi_log_quote(qdir, sizeof(qdir), dir);
	if (kvi_mdb_file_empty(dir)) {
		KVI_WARN("store_empty",
			 "dir=%s reason=\"data.mdb is 0 bytes: cut to nothing, "
			 "or never written\" note=\"starting without HTTP "
			 "registrations and pins; routers must register "
			 "again\"",
			 qdir);
	}
	kvi_err rv = kvc_cstore_open(dir, out, err, sizeof(err));
	if (rv != KVI_ECORRUPT) {
		if (rv != KVI_OK) {
			KVI_ERROR("store_failed", "dir=%s err=%s", qdir,
				  kvi_log_quote(qerr, sizeof(qerr), err));
		}
		return rv;
	}
	kvi_log_quote(qerr, sizeof(qerr), err);
	char moved[1024];
	if (kvi_store_quarantine(dir, moved, sizeof(moved)) != KVI_OK) {
		KVI_ERROR("store_corrupt",
			  "dir=%s err=%s note=\"cannot move it aside\"", qdir,
			  qerr);
		return rv;
	}
	KVI_ERROR("store_quarantined",
		  "dir=%s moved_to=%s err=%s note=\"starting without pins, "
		  "shards added "
		  "and drains; HTTP registrations the shards hold are taken "
		  "back from them\"",
		  qdir, kvi_log_quote(qmoved, sizeof(qmoved), moved), qerr);
	err[0] = '\0';
	rv = kvc_cstore_open(dir, out, err, sizeof(err));
	if (rv != KVI_OK) {
		KVI_ERROR("store_failed", "dir=%s err=%s", qdir,
			  kvi_log_quote(qerr, sizeof(qerr), err));
	}
	return rv;
}
