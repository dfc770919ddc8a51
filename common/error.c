#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const kvi_err_text[KVI_ERR_COUNT] = {
    [KVI_OK] = "success",
    [KVI_EINVAL] = "invalid argument",
    [KVI_EPROTO] = "malformed input",
    [KVI_ERANGE] = "value out of range",
    [KVI_ENOENT] = "not found",
    [KVI_EEXIST] = "already exists",
    [KVI_ETIMEDOUT] = "timed out",
    [KVI_EIO] = "I/O error",
    [KVI_ECLOSED] = "closed",
    [KVI_EFULL] = "resource full",
    [KVI_ECORRUPT] = "data corrupted",
    [KVI_EAGAIN] = "try again",
    [KVI_EVERSION] = "incompatible version",
    [KVI_EUNREACHABLE] = "peer unreachable",
    [KVI_ETOOBIG] = "request too large",
    [KVI_EINTERNAL] = "internal error",
    [KVI_ESTALE] = "stale leadership term",
    [KVI_EAUTH] = "not authenticated",
};

const char *
kvi_strerror(kvi_err err)
{
	if ((unsigned)err >= KVI_ERR_COUNT) {
		return "unknown error";
	}
	return kvi_err_text[err];
}

static void
kvi_vmsgf(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (err != NULL && errlen > 0) {
		vsnprintf(err, errlen, fmt, ap);
	}
}

void
kvi_msgf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kvi_vmsgf(err, errlen, fmt, ap);
	va_end(ap);
}

kvi_err
kvi_errf(char *err, size_t errlen, kvi_err rv, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kvi_vmsgf(err, errlen, fmt, ap);
	va_end(ap);
	return rv;
}
