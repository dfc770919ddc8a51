#include "prom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A line being read: [p, end). */
typedef struct line {
	const char *p, *end;
} line;

static void
skip_spaces(line *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\t')) {
		l->p++;
	}
}

/* label_value reads a quoted label value into buf (at most n - 1 bytes,
 * unescaped); false when it is not one. */
static bool
label_value(line *l, char *buf, size_t n)
{
	if (l->p >= l->end || *l->p != '"') {
		return false;
	}
	l->p++;
	size_t k = 0;
	while (l->p < l->end && *l->p != '"') {
		char c = *l->p++;
		if (c == '\\' && l->p < l->end) {
			c = *l->p++;
			c = c == 'n' ? '\n' : c;
		}
		if (k + 1 < n) {
			buf[k++] = c;
		}
	}
	buf[k] = '\0';
	if (l->p >= l->end) {
		return false;
	}
	l->p++; /* the closing quote */
	return true;
}

/* labels reads {a="x",b="y"} and finds the engine label's value as a
 * number; *engine is -1 without one. False when the labels do not read. */
static bool
labels(line *l, long *engine)
{
	*engine = -1;
	if (l->p >= l->end || *l->p != '{') {
		return true;
	}
	l->p++;
	for (;;) {
		skip_spaces(l);
		if (l->p < l->end && *l->p == '}') {
			l->p++;
			return true;
		}
		const char *name = l->p;
		while (l->p < l->end && *l->p != '=' && *l->p != '}') {
			l->p++;
		}
		if (l->p >= l->end || *l->p != '=') {
			return false;
		}
		size_t nlen = (size_t)(l->p - name);
		l->p++;
		char value[64];
		if (!label_value(l, value, sizeof(value))) {
			return false;
		}
		if (nlen == 6 && memcmp(name, "engine", 6) == 0) {
			char *e;
			long v = strtol(value, &e, 10);
			*engine =
			    (value[0] >= '0' && value[0] <= '9' && *e == '\0')
				? v
				: -2;
		}
		skip_spaces(l);
		if (l->p < l->end && *l->p == ',') {
			l->p++;
		}
	}
}

/* sample reads one sample line of name; false when it is another's or
 * does not read. */
static bool
sample(line l, const char *name, size_t nlen, long *engine, double *value)
{
	if ((size_t)(l.end - l.p) <= nlen || memcmp(l.p, name, nlen) != 0 ||
	    (l.p[nlen] != '{' && l.p[nlen] != ' ' && l.p[nlen] != '\t')) {
		return false;
	}
	l.p += nlen;
	if (!labels(&l, engine)) {
		return false;
	}
	skip_spaces(&l);
	char num[64];
	size_t k = 0;
	while (l.p < l.end && *l.p != ' ' && *l.p != '\t' &&
	       k + 1 < sizeof(num)) {
		num[k++] = *l.p++;
	}
	num[k] = '\0';
	char *e;
	*value = strtod(num, &e);
	return k > 0 && *e == '\0' && isfinite(*value) && *value >= 0;
}

size_t
kvc_prom_by_engine(const char *text, size_t len, const char *name,
		   uint64_t *out, bool *seen, size_t max)
{
	size_t nlen = strlen(name), taken = 0;
	const char *end = text + len;
	for (const char *p = text; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		line l = {p, nl != NULL ? nl : end};
		p = nl != NULL ? nl + 1 : end;
		skip_spaces(&l);
		long engine;
		double v;
		if (l.p >= l.end || *l.p == '#' ||
		    !sample(l, name, nlen, &engine, &v) || engine < 0 ||
		    (size_t)engine >= max) {
			continue;
		}
		out[engine] += (uint64_t)(v + 0.5);
		seen[engine] = true;
		taken++;
	}
	return taken;
}
