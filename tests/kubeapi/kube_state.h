/*
 * kube_state.h - files of the test API server: the state file and the
 * port file.
 *
 * The state file holds what a restarted server needs to continue where it
 * stopped: the pods (with their uids) and the current resourceVersion
 * (kube_store_dump). It is rewritten after every change, atomically (a
 * temporary file and a rename), so a server killed at any moment leaves
 * either the previous or the new state. The file is not fsynced: it must
 * survive the death of the process, not of the machine. Watch history is
 * not saved: a restored store's compacted_rv is its resourceVersion.
 *
 * Functions are called from the server's event loop; they block on the
 * file system.
 */
#ifndef KVI_KUBEAPI_KUBE_STATE_H
#define KVI_KUBEAPI_KUBE_STATE_H

#include <stddef.h>

#include "error.h"
#include "kube_store.h"

/* kube_state_load restores s from path. Returns KVI_ENOENT when the file
 * does not exist (s untouched), KVI_ECORRUPT when it is not a valid state
 * and KVI_EIO when it cannot be read. */
kvi_err kube_state_load(const char *path, kube_store *s);

/* kube_state_save writes s to path atomically. Returns KVI_EIO. */
kvi_err kube_state_save(const char *path, const kube_store *s);

/* kube_write_file_atomic writes len bytes to path through path.tmp and a
 * rename, so readers see the whole file or none. Returns KVI_EIO. */
kvi_err kube_write_file_atomic(const char *path, const char *data, size_t len);

#endif /* KVI_KUBEAPI_KUBE_STATE_H */
