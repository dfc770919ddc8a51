/*
 * fuzz_ctl_input.c - libFuzzer target for kvindexctl's parsers
 * (tools/ctl/ctl_input.h), which read the user's hash files and the
 * coordinator's pages of GET /workers.
 *
 * Each input goes to both. ctl_json_items must find, in any text that
 * jansson reads as an array, as many elements as jansson does, each span
 * one of them (parsed alone, equal to it); a text it refuses leaves its
 * out parameters alone. ctl_hashes_parse either refuses with a message
 * or gives at least one hash, each the decimal word it read. Built as a
 * libFuzzer binary with -DKVI_FUZZ=ON (clang), and as a corpus replayer
 * (replay_main.c) in every build.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_items(const char *text, size_t size)
{
	ctl_span *s = NULL;
	size_t n = 7;
	char err[256] = "";
	kvi_err rv = ctl_json_items(text, size, &s, &n, err, sizeof(err));
	json_t *arr = json_loadb(text, size, JSON_DECODE_ANY, NULL);
	if (rv != KVI_OK) {
		if (s != NULL || n != 7 || err[0] == '\0' ||
		    json_is_array(arr)) {
			abort(); /* an array jansson reads is never refused */
		}
		json_decref(arr);
		return;
	}
	if (json_is_array(arr) && json_array_size(arr) != n) {
		abort();
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i].len == 0 || s[i].off + s[i].len > size) {
			abort();
		}
		json_t *e = json_loadb(text + s[i].off, s[i].len,
				       JSON_DECODE_ANY, NULL);
		if (json_is_array(arr) &&
		    (e == NULL || !json_equal(e, json_array_get(arr, i)))) {
			abort();
		}
		json_decref(e);
	}
	kvi_free(s);
	json_decref(arr);
}

static void
fuzz_hashes(const char *text, size_t size)
{
	uint64_t *h = NULL;
	size_t n = 7;
	char err[256] = "";
	kvi_err rv = ctl_hashes_parse(text, size, &h, &n, err, sizeof(err));
	if (rv != KVI_OK) {
		if (h != NULL || n != 7 || err[0] == '\0') {
			abort();
		}
		return;
	}
	if (n == 0) {
		abort(); /* no hash at all is refused */
	}
	/* each hash is a decimal word of the text */
	for (size_t i = 0; i < n; i++) {
		char word[24];
		snprintf(word, sizeof(word), "%llu", (unsigned long long)h[i]);
		if (memmem(text, size, word, strlen(word)) == NULL) {
			abort();
		}
	}
	kvi_free(h);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_items((const char *)data, size);
	fuzz_hashes((const char *)data, size);
	return 0;
}
