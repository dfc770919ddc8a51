/*
 * recover_fixture.c - what the /kv_recover stream parser's tests share; see
 * recover_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "recover_fixture.h"

kvr_parser *p;

int
setup(void **state)
{
	(void)state;
	p = kvr_parser_alloc();
	return 0;
}

int
teardown(void **state)
{
	(void)state;
	kvr_parser_free(p);
	return 0;
}

/* ---- helpers --------------------------------------------------------- */

/* parse feeds doc in chunks of chunk bytes (0: at once) and finishes. */
kvi_err
parse(const char *doc, size_t len, size_t chunk)
{
	kvr_parser_reset(p);
	if (chunk == 0) {
		chunk = len;
	}
	for (size_t o = 0; o < len; o += chunk) {
		size_t n = len - o < chunk ? len - o : chunk;
		kvi_err rv = kvr_parser_feed(p, doc + o, n);
		if (rv != KVI_OK) {
			return rv;
		}
	}
	return kvr_parser_finish(p);
}

const kvr_response *
parse_ok(const char *doc)
{
	kvi_err rv = parse(doc, strlen(doc), 0);
	if (rv != KVI_OK) {
		fail_msg("parse failed: %s", kvr_parser_error(p));
	}
	const kvr_response *r = kvr_parser_result(p);
	assert_non_null(r);
	return r;
}

/* parse_bad checks that doc fails with KVI_EPROTO and a message that holds
 * want and says where. */
void
parse_bad(const char *doc, size_t len, const char *want)
{
	kvi_err rv = parse(doc, len, 0);
	const char *err = kvr_parser_error(p);
	if (rv != KVI_EPROTO) {
		fail_msg("%.80s: expected KVI_EPROTO, got %d", doc, rv);
	}
	assert_null(kvr_parser_result(p));
	if (strncmp(err, "byte ", 5) != 0 || strstr(err, want) == NULL) {
		fail_msg("%.80s: message \"%s\" lacks \"%s\"", doc, err, want);
	}
}
