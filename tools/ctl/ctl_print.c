#include "ctl_print.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

struct ctl_table {
	size_t ncols;
	char **cells; /* rows × ncols, the header first */
	size_t ncells, cap;
};

static void
table_push(ctl_table *t, char *cell)
{
	if (t->ncells == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->cells = kvi_reallocarray(t->cells, t->cap, sizeof(char *));
	}
	t->cells[t->ncells++] = cell;
}

ctl_table *
ctl_table_alloc(const char *const *headers, size_t n)
{
	ctl_table *t = kvi_calloc(1, sizeof(*t));
	t->ncols = n;
	for (size_t i = 0; i < n; i++) {
		table_push(t, kvi_strdup(headers[i]));
	}
	return t;
}

void
ctl_table_row(ctl_table *t)
{
	/* a row left short is filled with "-" */
	while (t->ncells % t->ncols != 0) {
		table_push(t, kvi_strdup("-"));
	}
}

void
ctl_table_cell(ctl_table *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cell = NULL;
	if (vasprintf(&cell, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	if (cell[0] == '\0') {
		free(cell);
		cell = kvi_strdup("-");
	} else {
		/* one line a row: a new line in a message is a space */
		for (char *p = cell; *p != '\0'; p++) {
			*p = *p == '\n' || *p == '\r' || *p == '\t' ? ' ' : *p;
		}
	}
	table_push(t, cell); /* kvi_free is free */
}

size_t
ctl_table_rows(const ctl_table *t)
{
	return (t->ncells + t->ncols - 1) / t->ncols - 1;
}

void
ctl_table_print(const ctl_table *t, FILE *out)
{
	size_t *width = kvi_calloc(t->ncols, sizeof(size_t));
	for (size_t i = 0; i < t->ncells; i++) {
		size_t w = strlen(t->cells[i]);
		size_t *cw = &width[i % t->ncols];
		*cw = w > *cw ? w : *cw;
	}
	size_t rows = (t->ncells + t->ncols - 1) / t->ncols;
	for (size_t r = 0; r < rows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			size_t i = r * t->ncols + c;
			const char *cell = i < t->ncells ? t->cells[i] : "-";
			bool last = c + 1 == t->ncols;
			fprintf(out, "%s%-*s", c ? "  " : "",
				last ? 0 : (int)width[c], cell);
		}
		fputc('\n', out);
	}
	kvi_free(width);
}

void
ctl_table_free(ctl_table *t)
{
	if (t == NULL) {
		return;
	}
	for (size_t i = 0; i < t->ncells; i++) {
		kvi_free(t->cells[i]);
	}
	kvi_free(t->cells);
	kvi_free(t);
}

void
ctl_fmt_bytes(char *buf, size_t len, uint64_t n)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
	if (n < 1024) {
		snprintf(buf, len, "%" PRIu64 "B", n);
		return;
	}
	double v = (double)n / 1024;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%s", v, unit[u]);
}

void
ctl_fmt_ms(char *buf, size_t len, const json_t *v)
{
	if (!json_is_integer(v)) {
		snprintf(buf, len, "never");
		return;
	}
	long long ms = json_integer_value(v);
	if (ms < 1000) {
		snprintf(buf, len, "%lldms", ms);
	} else if (ms < 60000) {
		snprintf(buf, len, "%.1fs", (double)ms / 1000);
	} else {
		snprintf(buf, len, "%lldm%llds", ms / 60000, ms % 60000 / 1000);
	}
}

const char *
ctl_str(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s != NULL ? s : dflt;
}

long long
ctl_int(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

void
ctl_print_raw(const char *body, size_t len)
{
	fwrite(body, 1, len, stdout);
	if (len == 0 || body[len - 1] != '\n') {
		fputc('\n', stdout);
	}
}

void
ctl_print_error(const ctl_resp *r)
{
	json_t *j = json_loadb(r->body, r->len, 0, NULL);
	const char *msg = json_string_value(json_object_get(j, "error"));
	if (msg != NULL) {
		fprintf(stderr, "kvindexctl: %s (HTTP %ld)\n", msg, r->status);
	} else if (r->status >= 300 && r->status < 400) {
		fprintf(stderr,
			"kvindexctl: redirected to %s (HTTP %ld), not "
			"followed: more than %d redirects, or not to an "
			"http:// or https:// URL\n",
			r->location != NULL ? r->location : "nowhere",
			r->status, CTL_HTTP_MAX_HOPS);
	} else {
		fprintf(stderr,
			"kvindexctl: HTTP %ld without an error message\n",
			r->status);
	}
	json_decref(j);
}
