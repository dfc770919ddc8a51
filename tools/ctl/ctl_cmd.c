#include "ctl_cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl_input.h"
#include "ctl_print.h"

const ctl_args ctl_args_defaults = {
    .limit = 1000,
    .dp_rank = -1,
    .dp_start_rank = -1,
};

int
ctl_flag_long(const char *prog, const kvi_flag *f, const char *arg, void *opts)
{
	long v;
	if (kvi_flag_number(prog, f, arg, &v) != 0) {
		return -1;
	}
	*(long *)((char *)opts + f->off) = v;
	return 0;
}

int
ctl_send(ctl_http *h, const char *method, const char *path, json_t *body,
	 bool json, json_t **ans, ctl_resp *r)
{
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	int rc = ctl_send_text(h, method, path, text, json, ans, r);
	free(text);
	return rc;
}

int
ctl_send_text(ctl_http *h, const char *method, const char *path,
	      const char *text, bool json, json_t **ans, ctl_resp *r_out)
{
	ctl_resp r;
	char err[512];
	kvi_err rv = ctl_http_call(h, method, path, text, &r, err, sizeof(err));
	*ans = NULL;
	int rc = CTL_EXIT_OK;
	if (rv != KVI_OK) {
		fprintf(stderr, "kvindexctl: cannot reach %s: %s\n",
			ctl_http_base(h), err);
		rc = CTL_EXIT_UNREACHABLE;
	} else {
		bool ok = r.status >= 200 && r.status < 300;
		if (json && r.len > 0) {
			ctl_print_raw(r.body, r.len);
		}
		if (!ok) {
			ctl_print_error(&r);
			rc = CTL_EXIT_ANSWER;
		} else if (!json && (*ans = json_loadb(r.body, r.len, 0,
						       NULL)) == NULL) {
			fprintf(stderr,
				"kvindexctl: the answer to %s %s is not JSON\n",
				method, path);
			rc = CTL_EXIT_ANSWER;
		}
	}
	if (r_out != NULL) {
		*r_out = r;
	} else {
		ctl_resp_fini(&r);
	}
	return rc;
}

/* cmd_append appends printf's output to the string *s (kvi_free). */
static void __attribute__((format(printf, 2, 3)))
cmd_append(char **s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *more = NULL;
	if (vasprintf(&more, fmt, ap) < 0) {
		abort();
	}
	va_end(ap);
	size_t n = *s != NULL ? strlen(*s) : 0, m = strlen(more);
	*s = kvi_realloc(*s, n + m + 1);
	memcpy(*s + n, more, m + 1);
	free(more);
}

/* cmd_param appends "&key=value", the value escaped, when value is set. */
static void
cmd_param(char **path, const char *key, const char *value)
{
	if (value != NULL) {
		char *v = ctl_http_escape(value);
		cmd_append(path, "&%s=%s", key, v);
		kvi_free(v);
	}
}

/* cmd_items_add adds the entries of one page, ans (the array parsed from
 * the body of r), to it. Returns an exit status. */
static int
cmd_items_add(ctl_items *it, const ctl_resp *r, json_t *ans)
{
	ctl_span *s = NULL;
	size_t n = 0;
	char err[256];
	if (ctl_json_items(r->body, r->len, &s, &n, err, sizeof(err)) !=
		KVI_OK ||
	    !json_is_array(ans) || json_array_size(ans) != n) {
		fprintf(stderr, "kvindexctl: GET /workers: not an array\n");
		kvi_free(s);
		return CTL_EXIT_ANSWER;
	}
	for (size_t i = 0; i < n; i++) {
		if (it->n == it->cap) {
			it->cap = it->cap ? it->cap * 2 : 256;
			it->text =
			    kvi_reallocarray(it->text, it->cap, sizeof(char *));
			it->val = kvi_reallocarray(it->val, it->cap,
						   sizeof(json_t *));
		}
		it->text[it->n] = kvi_strndup(r->body + s[i].off, s[i].len);
		it->val[it->n] = json_incref(json_array_get(ans, i));
		it->n++;
	}
	kvi_free(s);
	return CTL_EXIT_OK;
}

int
ctl_workers_get(ctl_http *h, const char *model, const char *pod, long limit,
		bool json, ctl_items *out)
{
	memset(out, 0, sizeof(*out));
	char *cursor = NULL;
	uint64_t last = 0;
	int rc;
	for (;;) {
		char *path = NULL;
		cmd_append(&path, "/workers?limit=%ld", limit);
		cmd_param(&path, "model_name", model);
		cmd_param(&path, "name", pod);
		cmd_param(&path, "cursor", cursor);
		ctl_resp r;
		json_t *ans;
		rc = ctl_send(h, "GET", path, NULL, false, &ans, &r);
		kvi_free(path);
		if (rc == CTL_EXIT_OK) {
			rc = cmd_items_add(out, &r, ans);
		} else if (json && r.status >= 300) {
			ctl_print_raw(r.body, r.len);
		}
		json_decref(ans);
		kvi_free(cursor);
		cursor = r.next_cursor;
		r.next_cursor = NULL;
		ctl_resp_fini(&r);
		if (rc != CTL_EXIT_OK || cursor == NULL) {
			break;
		}
		/* instances come in id order: a cursor that does not advance
		 * would page for ever */
		errno = 0;
		uint64_t next = strtoull(cursor, NULL, 10);
		if (errno != 0 || (last != 0 && next <= last)) {
			fprintf(stderr,
				"kvindexctl: GET /workers: the cursor %s does "
				"not advance\n",
				cursor);
			rc = CTL_EXIT_ANSWER;
			break;
		}
		last = next;
	}
	kvi_free(cursor);
	return rc;
}

void
ctl_items_fini(ctl_items *it)
{
	for (size_t i = 0; i < it->n; i++) {
		kvi_free(it->text[i]);
		json_decref(it->val[i]);
	}
	kvi_free(it->text);
	kvi_free(it->val);
	memset(it, 0, sizeof(*it));
}

char *
ctl_items_join(const ctl_items *it, const bool *keep)
{
	size_t len = 3;
	for (size_t i = 0; i < it->n; i++) {
		len += strlen(it->text[i]) + 1;
	}
	char *s = kvi_malloc(len), *p = s;
	*p++ = '[';
	bool first = true;
	for (size_t i = 0; i < it->n; i++) {
		if (keep != NULL && !keep[i]) {
			continue;
		}
		if (!first) {
			*p++ = ',';
		}
		size_t n = strlen(it->text[i]);
		memcpy(p, it->text[i], n);
		p += n;
		first = false;
	}
	*p++ = ']';
	*p = '\0';
	return s;
}

int
ctl_read(const char *path, char **text, size_t *len)
{
	bool in = path == NULL || strcmp(path, "-") == 0;
	FILE *f = in ? stdin : fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "kvindexctl: %s: %s\n", path, strerror(errno));
		return CTL_EXIT_USAGE;
	}
	char *buf = NULL;
	size_t n = 0, cap = 0, got;
	do {
		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 65536;
			buf = kvi_realloc(buf, cap + 1);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	bool failed = ferror(f);
	if (!in) {
		fclose(f);
	}
	if (failed) {
		fprintf(stderr, "kvindexctl: %s: cannot be read\n",
			in ? "standard input" : path);
		kvi_free(buf);
		return CTL_EXIT_USAGE;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return CTL_EXIT_OK;
}

int
ctl_usage(const kvi_flags *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", cmd->prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s %s\n", cmd->prog, cmd->synopsis);
	return CTL_EXIT_USAGE;
}
