#include "ctl_input.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

/* input_sep: white space, a comma, brackets and quotes around words. */
static bool
input_sep(char c)
{
	return strchr(" \t\r\n,[]\"", c) != NULL;
}

/* input_u64 parses the w bytes at p as a decimal u64. */
static bool
input_u64(const char *p, size_t w, uint64_t *v)
{
	if (w == 0 || w > 20) {
		return false;
	}
	uint64_t x = 0;
	for (size_t i = 0; i < w; i++) {
		if (p[i] < '0' || p[i] > '9') {
			return false;
		}
		unsigned d = (unsigned)(p[i] - '0');
		if (x > (UINT64_MAX - d) / 10) {
			return false;
		}
		x = x * 10 + d;
	}
	*v = x;
	return true;
}

kvi_err
ctl_hashes_parse(const char *text, size_t len, uint64_t **out, size_t *n,
		 char *err, size_t errlen)
{
	uint64_t *h = NULL;
	size_t count = 0, cap = 0;
	for (size_t i = 0; i < len;) {
		if (input_sep(text[i])) {
			i++;
			continue;
		}
		size_t w = 0;
		while (i + w < len && !input_sep(text[i + w])) {
			w++;
		}
		uint64_t v;
		if (!input_u64(text + i, w, &v)) {
			kvi_free(h);
			return kvi_errf(err, errlen, KVI_EINVAL,
					"hash %zu: %.*s is not a u64", count,
					(int)(w > 40 ? 40 : w), text + i);
		}
		if (count == cap) {
			cap = cap ? cap * 2 : 64;
			h = kvi_reallocarray(h, cap, sizeof(*h));
		}
		h[count++] = v;
		i += w;
	}
	if (count == 0) {
		return kvi_errf(err, errlen, KVI_ENOENT, "no block hash");
	}
	*out = h;
	*n = count;
	return KVI_OK;
}

static size_t
input_ws(const char *t, size_t i, size_t len)
{
	while (i < len && strchr(" \t\r\n", t[i]) != NULL) {
		i++;
	}
	return i;
}

/* input_value returns the end of the value starting at i: the first ','
 * or ']' outside strings and nesting, or len (also when a backslash ends
 * the text). */
static size_t
input_value(const char *t, size_t i, size_t len)
{
	size_t depth = 0;
	bool str = false;
	for (; i < len; i++) {
		char c = t[i];
		if (str) {
			if (c == '\\') {
				i++;
			} else if (c == '"') {
				str = false;
			}
		} else if (c == '"') {
			str = true;
		} else if (c == '[' || c == '{') {
			depth++;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		} else if ((c == ',' || c == ']') && depth == 0) {
			break;
		}
	}
	return i < len ? i : len;
}

kvi_err
ctl_json_items(const char *text, size_t len, ctl_span **out, size_t *n,
	       char *err, size_t errlen)
{
	size_t i = input_ws(text, 0, len), count = 0, cap = 0;
	ctl_span *s = NULL;
	if (i == len || text[i] != '[') {
		return kvi_errf(err, errlen, KVI_EPROTO, "not a JSON array");
	}
	i = input_ws(text, i + 1, len);
	while (i < len && text[i] != ']') {
		size_t end = input_value(text, i, len), last = end;
		while (last > i && strchr(" \t\r\n", text[last - 1]) != NULL) {
			last--;
		}
		if (end == len || last == i) {
			kvi_free(s);
			return kvi_errf(err, errlen, KVI_EPROTO,
					"element %zu of the array is cut short "
					"or empty",
					count);
		}
		if (count == cap) {
			cap = cap ? cap * 2 : 64;
			s = kvi_reallocarray(s, cap, sizeof(*s));
		}
		s[count++] = (ctl_span){i, last - i};
		i = text[end] == ',' ? input_ws(text, end + 1, len) : end;
	}
	if (i == len || input_ws(text, i + 1, len) != len) {
		kvi_free(s);
		return kvi_errf(err, errlen, KVI_EPROTO,
				"the array does not end, or something follows "
				"it");
	}
	*out = s;
	*n = count;
	return KVI_OK;
}
