#include "sim_json.h"

#include <string.h>

#include "alloc.h"

void
sim_buf_init(sim_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void
sim_buf_fini(sim_buf *b)
{
	kvi_free(b->data);
	memset(b, 0, sizeof(*b));
}

static void
sim_buf_reserve(sim_buf *b, size_t n)
{
	if (b->len + n + 1 <= b->cap) {
		return;
	}
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1) {
		cap *= 2;
	}
	b->data = kvi_realloc(b->data, cap);
	b->cap = cap;
}

void
sim_buf_add(sim_buf *b, const char *s, size_t n)
{
	sim_buf_reserve(b, n);
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
sim_buf_puts(sim_buf *b, const char *s)
{
	sim_buf_add(b, s, strlen(s));
}

void
sim_buf_u64(sim_buf *b, uint64_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	sim_buf_add(b, tmp + i, sizeof(tmp) - i);
}

void
sim_buf_i64(sim_buf *b, int64_t v)
{
	if (v < 0) {
		sim_buf_add(b, "-", 1);
		sim_buf_u64(b, (uint64_t)0 - (uint64_t)v);
	} else {
		sim_buf_u64(b, (uint64_t)v);
	}
}

void
sim_buf_str(sim_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	sim_buf_add(b, "\"", 1);
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			sim_buf_add(b, e, 2);
		} else if (c < 0x20) {
			char e[6] = {'\\', 'u',         '0',
				     '0',  hex[c >> 4], hex[c & 15]};
			sim_buf_add(b, e, 6);
		} else {
			sim_buf_add(b, (const char *)&c, 1);
		}
	}
	sim_buf_add(b, "\"", 1);
}

char *
sim_buf_release(sim_buf *b, size_t *len)
{
	if (b->data == NULL) {
		sim_buf_reserve(b, 0);
		b->data[0] = '\0';
	}
	char *out = b->data;
	*len = b->len;
	memset(b, 0, sizeof(*b));
	return out;
}

bool
sim_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (s == NULL || *s == '\0') {
		return false;
	}
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9') {
			return false;
		}
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10) {
			return false;
		}
		v = v * 10 + d;
	}
	*out = v;
	return true;
}
