/*
 * lmdb_err.h - an LMDB return code as a kvi_err, the same way for every
 * module that keeps state in LMDB (the shard's store, the coordinator's
 * store). Header-only, so that common/ does not link LMDB; the includer
 * does.
 */
#ifndef KVI_COMMON_LMDB_ERR_H
#define KVI_COMMON_LMDB_ERR_H

#include <errno.h>
#include <lmdb.h>

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

#endif /* KVI_COMMON_LMDB_ERR_H */
