#include "qerr.h"

#include <stdarg.h>
#include <stdio.h>

kvi_err
kvc_qerr_set(kvc_qerr *e, kvi_err rv, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	/* Messages quote client bytes (a parser's "near '...'"); keep them
	 * ASCII so the error body is always valid JSON text. */
	for (char *c = e->message; *c != '\0'; c++) {
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) {
			*c = '?';
		}
	}
	e->status = status;
	json_decref(e->extra);
	e->extra = NULL;
	return rv;
}

json_t *
kvc_qerr_body(const kvc_qerr *e)
{
	json_t *body = json_object();
	json_object_set_new(body, "error", json_string(e->message));
	if (json_is_object(e->extra)) {
		json_object_update_missing(body, e->extra);
	}
	return body;
}

void
kvc_qerr_fini(kvc_qerr *e)
{
	json_decref(e->extra);
	e->extra = NULL;
}
