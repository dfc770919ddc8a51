#include "vectors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

json_t *
vectors_load(const char *rel)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", KVI_DATA_DIR, rel);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		fail_msg("cannot open %s", path);
	}
	json_t *all = json_array();
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		lineno++;
		if (n <= 1) {
			continue;
		}
		json_error_t err;
		json_t *v = json_loads(line, 0, &err);
		if (v == NULL) {
			fail_msg("%s:%d: %s", path, lineno, err.text);
		}
		json_array_append_new(all, v);
	}
	free(line);
	fclose(f);
	assert_true(json_array_size(all) > 0);
	return all;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

uint8_t *
vectors_hex(const char *hex, size_t *len)
{
	size_t n = strlen(hex);
	assert_int_equal(n % 2, 0);
	uint8_t *out = malloc(n / 2 + 1);
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		assert_true(hi >= 0 && lo >= 0);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return out;
}

uint64_t
vectors_u64(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	assert_true(*s != '\0' && *end == '\0');
	return (uint64_t)v;
}
