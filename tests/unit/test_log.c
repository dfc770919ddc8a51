/*
 * test_log.c - log values (common/log.c): whatever bytes a value holds,
 * kvi_log_quote keeps it one quoted, UTF-8 value on its line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "log.h"

static void
quoted(const char *in, const char *want)
{
	char buf[128];
	assert_string_equal(kvi_log_quote(buf, sizeof(buf), in), want);
}

static void
test_quote_escapes(void **state)
{
	(void)state;
	quoted("plain words", "\"plain words\"");
	quoted(NULL, "\"\"");
	quoted("a \"b\" c\\d", "\"a \\\"b\\\" c\\\\d\"");
	quoted("line\nnext\r\tend", "\"line\\nnext\\r\\tend\"");
	quoted("\x01\x1f\x7f", "\"\\x01\\x1f\\x7f\"");
	/* UTF-8 stays as it is: two, three and four bytes */
	quoted("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	       "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	/* what is not UTF-8 is escaped, byte by byte */
	quoted("\xff\xfe", "\"\\xff\\xfe\"");
	quoted("\xc3", "\"\\xc3\"");                   /* cut short */
	quoted("\xc3(", "\"\\xc3(\"");                 /* not a continuation */
	quoted("\xc0\xaf", "\"\\xc0\\xaf\"");          /* overlong */
	quoted("\xed\xa0\x80", "\"\\xed\\xa0\\x80\""); /* a surrogate */
	quoted("\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\""); /* > U+10FFFF */
}

static void
test_quote_truncates_whole(void **state)
{
	(void)state;
	char buf[8];
	/* room for 5 bytes between the quotes: an escape is never cut */
	assert_string_equal(kvi_log_quote(buf, sizeof(buf), "abcd\n"),
			    "\"abcd\"");
	assert_string_equal(kvi_log_quote(buf, sizeof(buf), "a\xff"),
			    "\"a\\xff\"");
	assert_string_equal(kvi_log_quote(buf, sizeof(buf), "ab\xff"),
			    "\"ab\"");
	assert_string_equal(
	    kvi_log_quote(buf, sizeof(buf), "a\xf0\x9f\x98\x80"),
	    "\"a\xf0\x9f\x98\x80\"");
	assert_string_equal(
	    kvi_log_quote(buf, sizeof(buf), "ab\xf0\x9f\x98\x80"), "\"ab\"");
	assert_string_equal(kvi_log_quote(buf, 3, "abc"), "\"\"");
	assert_string_equal(kvi_log_quote(buf, 2, "abc"), "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quote_escapes),
	    cmocka_unit_test(test_quote_truncates_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
