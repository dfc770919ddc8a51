/*
 * test_cli.c - kvi_secret_read: a secret file's white space is not part
 * of the secret, and a secret that is empty, has white space or control
 * characters inside, or does not fit is refused with a reason, never cut
 * short.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"

static char path[256];

static int
setup(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/kvi-secret-%d", tmp ? tmp : "/tmp",
		 (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	close(fd);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static void
write_file(const char *text, size_t len)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

/* read_secret reads the file into a buffer of len bytes. */
static kvi_err
read_secret(size_t len, char *out, char *err)
{
	err[0] = '\0';
	return kvi_secret_read(path, out, len, err, 256);
}

static void
test_white_space_around(void **state)
{
	(void)state;
	const char *files[] = {"s3cr3t", "s3cr3t\n", "s3cr3t \n",
			       "  s3cr3t\r\n\n", "\ts3cr3t\t"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		write_file(files[i], strlen(files[i]));
		char out[64], err[256];
		assert_int_equal(read_secret(sizeof(out), out, err), KVI_OK);
		assert_string_equal(out, "s3cr3t");
	}
}

static void
test_refused(void **state)
{
	(void)state;
	struct {
		const char *text;
		size_t len;
		const char *why;
	} cases[] = {
	    {"", 0, "empty"},
	    {" \n\n", 3, "empty"},
	    {"two words\n", 10, "white space"},
	    {"line\nline\n", 10, "white space"},
	    {"nul\0byte", 8, "outside"},
	    {"caf\xc3\xa9", 5, "outside"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_file(cases[i].text, cases[i].len);
		char out[64] = "x", err[256];
		assert_int_equal(read_secret(sizeof(out), out, err),
				 KVI_EINVAL);
		assert_non_null(strstr(err, cases[i].why));
		assert_non_null(strstr(err, path));
		assert_string_equal(out, "");
	}
}

static void
test_length(void **state)
{
	(void)state;
	/* what fits is read whole: 4,096 bytes in a buffer of 4,097 */
	size_t n = 4096;
	char *text = malloc(n + 2), *out = malloc(n + 1), err[256];
	memset(text, 'a', n);
	text[n - 1] = 'z';
	text[n] = '\n';
	write_file(text, n + 1);
	assert_int_equal(read_secret(n + 1, out, err), KVI_OK);
	assert_int_equal(strlen(out), n);
	assert_int_equal(out[n - 1], 'z');
	/* one byte more is refused, not cut to what fits */
	text[n] = 'b';
	text[n + 1] = '\n';
	write_file(text, n + 2);
	assert_int_equal(read_secret(n + 1, out, err), KVI_EINVAL);
	assert_non_null(strstr(err, "longer than 4096 bytes"));
	free(text);
	free(out);
}

static void
test_missing_file(void **state)
{
	(void)state;
	unlink(path);
	char out[64], err[256];
	assert_int_equal(read_secret(sizeof(out), out, err), KVI_EIO);
	assert_non_null(strstr(err, "No such file"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_white_space_around, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_length, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
