/*
 * lmdb_util.h - what every module that keeps state in LMDB (the shard's
 * store, the coordinator's store) does the same way: an LMDB return code
 * as a kvi_err, growing a full map, checking that the file holds what
 * LMDB will read, and moving a damaged store aside. Their records are
 * sealed with bytes.h. Header-only, so that common/ does not link LMDB;
 * the includer does.
 *
 * LMDB reads its file through a memory map. A file cut short (a full disk
 * when it was copied, a bad restore, a truncate) still opens, since LMDB
 * reads only its two meta pages then, but the first read of a page past
 * the end of the file is a SIGBUS that kills the process, at every start.
 * So a store is checked with kvi_mdb_check_size() right after
 * mdb_env_open() and before any transaction, and one cut short is
 * KVI_ECORRUPT like any other damage.
 */
#ifndef KVI_COMMON_LMDB_UTIL_H
#define KVI_COMMON_LMDB_UTIL_H

#include <errno.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
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

/* kvi_mdb_check_size checks that the data file of env, just opened, holds
 * every page LMDB's newest meta page says is in use (me_last_pgno + 1
 * pages of ms_psize bytes). It reads the meta pages only: call it before
 * any transaction. Returns KVI_ECORRUPT for a file cut short, with both
 * sizes in err, and KVI_EIO when the file cannot be examined. */
static inline kvi_err
kvi_mdb_check_size(MDB_env *env, char *err, size_t errlen)
{
	MDB_envinfo info;
	MDB_stat ms;
	mdb_filehandle_t fd;
	struct stat st;
	if (mdb_env_info(env, &info) != 0 || mdb_env_stat(env, &ms) != 0 ||
	    mdb_env_get_fd(env, &fd) != 0 || fstat(fd, &st) != 0) {
		return kvi_errf(err, errlen, KVI_EIO,
				"cannot read the size of data.mdb");
	}
	uint64_t pages = (uint64_t)info.me_last_pgno + 1;
	uint64_t need = pages * ms.ms_psize;
	if ((uint64_t)st.st_size >= need) {
		return KVI_OK;
	}
	return kvi_errf(err, errlen, KVI_ECORRUPT,
			"data.mdb is %llu bytes, but its meta page says %llu "
			"pages of %u bytes are in use (%llu bytes): the file "
			"was cut short",
			(unsigned long long)st.st_size,
			(unsigned long long)pages, ms.ms_psize,
			(unsigned long long)need);
}

/* kvi_mdb_file_empty says whether dir holds a data.mdb of 0 bytes: a
 * store cut to nothing, which LMDB takes for a new one (so does a store
 * whose creation was interrupted before LMDB's first write). */
static inline bool
kvi_mdb_file_empty(const char *dir)
{
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

/* kvi_store_quarantine renames the store directory dir to
 * dir.corrupt-<unix time> (with -2, -3, ... after it when a store was
 * moved aside in the same second), written into moved_to, so that a fresh
 * store can open in its place while the damaged one is kept for
 * inspection. Returns KVI_EIO when it cannot be renamed. */
static inline kvi_err
kvi_store_quarantine(const char *dir, char *moved_to, size_t len)
{
	long long now = (long long)time(NULL);
	for (int n = 1; n <= 100; n++) {
		if (n == 1) {
			snprintf(moved_to, len, "%s.corrupt-%lld", dir, now);
		} else {
			snprintf(moved_to, len, "%s.corrupt-%lld-%d", dir, now,
				 n);
		}
		struct stat st;
		if (lstat(moved_to, &st) == 0) {
			continue; /* taken: rename would replace it if empty */
		}
		return rename(dir, moved_to) == 0 ? KVI_OK : KVI_EIO;
	}
	return KVI_EIO;
}

#endif /* KVI_COMMON_LMDB_UTIL_H */
