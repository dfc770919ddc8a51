/*
 * lmdb_util.h - what every module that keeps state in LMDB (the shard's
 * store, the coordinator's store) does the same way: an LMDB return code
 * as a kvi_err, growing a full map, and moving a damaged store aside.
 * Their records are sealed with bytes.h. Header-only, so that common/
 * does not link LMDB; the includer does.
 */
#ifndef KVI_COMMON_LMDB_UTIL_H
#define KVI_COMMON_LMDB_UTIL_H

#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <time.h>

#include "error.h"

/* kvi_mdb_err translates an LMDB (or errno) return code: a full map or
 * disk is KVI_EFULL, a damaged or foreign file KVI_ECORRUPT. */
static inline kvi_err
kvi_mdb_err(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return KVI_OK;
	case MDB_NOTFOUND:
		return KVI_ENOENT;
	case MDB_MAP_FULL:
	case ENOSPC:
	case EDQUOT:
		return KVI_EFULL;
	case MDB_INVALID:
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_VERSION_MISMATCH:
	case MDB_BAD_TXN:
		return KVI_ECORRUPT;
	default:
		return KVI_EIO;
	}
}

/* kvi_mdb_grow doubles env's map after MDB_MAP_FULL, to at most max
 * bytes (0: no limit), and moves *size with it. Returns MDB_MAP_FULL when
 * the map is at its limit already, else what mdb_env_set_mapsize does. */
static inline int
kvi_mdb_grow(MDB_env *env, size_t *size, size_t max)
{
	size_t grown = *size * 2;
	if (max != 0 && grown > max) {
		grown = max;
	}
	if (grown <= *size) {
		return MDB_MAP_FULL;
	}
	int rc = mdb_env_set_mapsize(env, grown);
	if (rc == 0) {
		*size = grown;
	}
	return rc;
}

/* kvi_store_quarantine renames the store directory dir to
 * dir.corrupt-<unix time>, written into moved_to, so that a fresh store
 * can open in its place while the damaged one is kept for inspection. */
static inline kvi_err
kvi_store_quarantine(const char *dir, char *moved_to, size_t len)
{
	snprintf(moved_to, len, "%s.corrupt-%lld", dir, (long long)time(NULL));
	return rename(dir, moved_to) == 0 ? KVI_OK : KVI_EIO;
}

#endif /* KVI_COMMON_LMDB_UTIL_H */
