/*
 * qerr.h - an error answer: an HTTP status, a message and any extra
 * fields, as docs/api.md#conventions writes them: {"error": "...", ...}.
 *
 * A query is refused with one: by the parser of its body (api/, 400 or
 * 413), for a model no pod serves (404), a restriction the registry does
 * not know (400, with "connected_ranks"), or when no shard answers (503).
 * The API's other parsers (/register, /unregister) refuse their bodies
 * with the same type.
 *
 * Messages name the field and the value that were wrong, e.g.
 * "token_ids[3]: 4294967296 is not a u32"; they are kept printable ASCII,
 * so that the error body is always valid JSON text whatever a client sent.
 *
 * An error starts zeroed ({0}); a function that fails writes it, and it
 * then owns `extra` until kvc_qerr_fini().
 */
#ifndef KVI_COORDINATOR_QERR_H
#define KVI_COORDINATOR_QERR_H

#include <jansson.h>

#include "error.h"

typedef struct kvc_qerr {
	int status;        /* HTTP status: 400, 413, or what the caller sets */
	char message[256]; /* NUL-terminated */
	json_t *extra;     /* NULL, or an object merged into the error body */
} kvc_qerr;

/* kvc_qerr_set fills e with status and a formatted message (bytes that are
 * not printable ASCII become '?'), dropping any extra it held. It returns
 * rv, so a caller can write `return kvc_qerr_set(e, rv, 400, ...)`. */
kvi_err kvc_qerr_set(kvc_qerr *e, kvi_err rv, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* kvc_qerr_body returns a new object {"error": message, ...extra} (the
 * caller owns it; e keeps its extra). */
json_t *kvc_qerr_body(const kvc_qerr *e);

/* kvc_qerr_fini releases e->extra; safe on a zeroed error, and twice. */
void kvc_qerr_fini(kvc_qerr *e);

#endif /* KVI_COORDINATOR_QERR_H */
