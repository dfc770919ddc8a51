/*
 * api_fixture.h - what the API body tests share: J() writes JSON with '
 * for ".
 */
#ifndef KVI_TESTS_API_FIXTURE_H
#define KVI_TESTS_API_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

/* J returns s with every ' turned into ", in one of a few static buffers. */
static inline const char *
J(const char *s)
{
	static char bufs[4][4096];
	static int next;
	char *b = bufs[next++ % 4];
	size_t n = strlen(s);
	assert_true(n < sizeof(bufs[0]));
	for (size_t i = 0; i <= n; i++) {
		b[i] = s[i] == '\'' ? '"' : s[i];
	}
	return b;
}

#endif /* KVI_TESTS_API_FIXTURE_H */
