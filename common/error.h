/*
 * error.h - the project-wide error code.
 *
 * Every fallible kvindex function returns a kvi_err: 0 (KVI_OK) on success,
 * a positive code otherwise. Errors of the libraries underneath (LMDB,
 * ZeroMQ, nng, protobuf-c, libcurl) are translated into these codes once, at
 * the boundary of the module that calls them; the library's own message, when
 * it matters, goes to the log or to a caller-supplied message buffer.
 */
#ifndef KVI_COMMON_ERROR_H
#define KVI_COMMON_ERROR_H

#include <stddef.h>

typedef enum kvi_err {
	KVI_OK = 0,
	KVI_EINVAL,    /* an argument or a configuration value is invalid */
	KVI_EPROTO,    /* malformed input from a peer (wire, JSON, msgpack) */
	KVI_ERANGE,    /* a value does not fit its type (rank, token id) */
	KVI_ENOENT,    /* no such listener, model, key or file */
	KVI_EEXIST,    /* already present (duplicate registration) */
	KVI_ETIMEDOUT, /* a deadline passed */
	KVI_EIO,       /* an operating-system or storage I/O error */
	KVI_ECLOSED,   /* the object or connection is closed */
	KVI_EFULL,     /* a bounded resource is full (map, disk, queue) */
	KVI_ECORRUPT,  /* stored data failed a consistency check */
	KVI_EAGAIN,    /* not possible now; try again later */
	KVI_EVERSION,  /* the peer speaks an incompatible message version */
	KVI_EUNREACHABLE, /* the peer could not be reached */
	KVI_ETOOBIG,      /* a request exceeds a configured limit */
	KVI_EINTERNAL,    /* a broken invariant; a bug */
	KVI_ESTALE,       /* a command of a leadership term already passed */
	KVI_EAUTH,        /* a request without the credentials asked for */
	KVI_ERR_COUNT
} kvi_err;

/* kvi_strerror returns a static, human-readable description of err. */
const char *kvi_strerror(kvi_err err);

/* kvi_msgf writes a printf-style message into the caller's buffer err of
 * errlen bytes (nothing when err is NULL or errlen is 0). */
void kvi_msgf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* kvi_errf does the same and returns rv, so that a function fails in one
 * statement: return kvi_errf(err, errlen, KVI_EINVAL, "...", ...). */
kvi_err kvi_errf(char *err, size_t errlen, kvi_err rv, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* KVI_COMMON_ERROR_H */
