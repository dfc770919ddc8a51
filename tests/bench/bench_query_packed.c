/*
 * bench_query_packed.c - packed /query requests and the check of their
 * answers (bench_query_packed.h).
 */
#include "bench_query_packed.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

#define SHOWN 5  /* mismatches printed */
#define CLIP  60 /* bytes of each answer shown from where they part */

static bool
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

char *
bq_packed_target(const char *model, uint32_t top_k)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t cap = strlen("/query?model_name=") + 3 * strlen(model) +
		     strlen("&top_k=4294967295") + 1;
	char *s = kvi_malloc(cap);
	size_t k = (size_t)snprintf(s, cap, "/query?model_name=");
	for (const unsigned char *p = (const unsigned char *)model; *p; p++) {
		if (unreserved(*p)) {
			s[k++] = (char)*p;
		} else {
			s[k++] = '%';
			s[k++] = hex[*p >> 4];
			s[k++] = hex[*p & 15];
		}
	}
	s[k] = '\0';
	if (top_k > 0) {
		snprintf(s + k, cap - k, "&top_k=%u", top_k);
	}
	return s;
}

char *
bq_packed_body(const uint32_t *tokens, size_t n)
{
	unsigned char *b = kvi_malloc(4 * n + 1);
	for (size_t i = 0; i < n; i++) {
		b[4 * i] = (unsigned char)(tokens[i] & 0xff);
		b[4 * i + 1] = (unsigned char)(tokens[i] >> 8 & 0xff);
		b[4 * i + 2] = (unsigned char)(tokens[i] >> 16 & 0xff);
		b[4 * i + 3] = (unsigned char)(tokens[i] >> 24);
	}
	return (char *)b;
}

/* parting returns the offset of the first byte where a and b differ, or
 * the shorter length when one is a prefix of the other. */
static size_t
parting(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i = 0;
	while (i < alen && i < blen && a[i] == b[i]) {
		i++;
	}
	return i;
}

static int
clip(size_t len, size_t at)
{
	return (int)(len - at < CLIP ? len - at : CLIP);
}

size_t
bq_packed_compare(const char *set, char *const *json, const size_t *json_len,
		  char *const *packed, const size_t *packed_len, size_t n)
{
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		const char *a = json[i], *b = packed[i];
		size_t alen = json_len[i], blen = packed_len[i];
		if (alen == blen && memcmp(a, b, alen) == 0) {
			continue;
		}
		if (bad++ >= SHOWN) {
			continue;
		}
		size_t at = parting(a, alen, b, blen);
		fprintf(stderr,
			"check: kvindex %s body %zu: packed answer (%zu bytes) "
			"differs from the JSON one (%zu bytes) at byte %zu:\n"
			"  json:   ...%.*s\n  packed: ...%.*s\n",
			set, i, blen, alen, at, clip(alen, at), a + at,
			clip(blen, at), b + at);
	}
	return bad;
}
