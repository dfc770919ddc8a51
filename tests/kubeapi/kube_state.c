#include "kube_state.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"

kvi_err
kube_write_file_atomic(const char *path, const char *data, size_t len)
{
	size_t plen = strlen(path) + 5;
	char *tmp = kvi_malloc(plen);
	snprintf(tmp, plen, "%s.tmp", path);
	kvi_err rv = KVI_EIO;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		goto out;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			goto out;
		}
		off += (size_t)w;
	}
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		goto out;
	}
	rv = KVI_OK;
out:
	kvi_free(tmp);
	return rv;
}

kvi_err
kube_state_load(const char *path, kube_store *s)
{
	if (access(path, F_OK) != 0) {
		return errno == ENOENT ? KVI_ENOENT : KVI_EIO;
	}
	json_error_t jerr;
	json_t *state = json_load_file(path, 0, &jerr);
	if (state == NULL) {
		return access(path, R_OK) == 0 ? KVI_ECORRUPT : KVI_EIO;
	}
	kvi_err rv = kube_store_restore(s, state);
	json_decref(state);
	return rv == KVI_EEXIST ? KVI_EINTERNAL : rv;
}

kvi_err
kube_state_save(const char *path, const kube_store *s)
{
	json_t *state = kube_store_dump(s);
	char *text = json_dumps(state, JSON_COMPACT);
	json_decref(state);
	if (text == NULL) {
		kvi_oom(0);
	}
	kvi_err rv = kube_write_file_atomic(path, text, strlen(text));
	free(text); /* allocated by jansson */
	return rv;
}
