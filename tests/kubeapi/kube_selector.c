#include "kube_selector.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kube_fields.h"

#define NAME_MAX_LEN   63
#define PREFIX_MAX_LEN 253

typedef enum sel_op {
	OP_IN, /* also = and == */
	OP_NOTIN,
	OP_EXISTS,
	OP_NOT_EXISTS,
	OP_GT,
	OP_LT,
} sel_op;

typedef struct requirement {
	char *key;
	sel_op op;
	char **values;
	size_t nvalues;
	int64_t bound; /* OP_GT, OP_LT */
} requirement;

struct kube_selector {
	kube_selector_kind kind;
	requirement *reqs;
	size_t n;
};

/* The tokens of labels.Parse's lexer. */
typedef enum tok_kind {
	TOK_END,
	TOK_ID,
	TOK_IN,
	TOK_NOTIN,
	TOK_NOT,   /* ! */
	TOK_EQ,    /* = */
	TOK_EQEQ,  /* == */
	TOK_NE,    /* != */
	TOK_GT,    /* > */
	TOK_LT,    /* < */
	TOK_OPEN,  /* ( */
	TOK_CLOSE, /* ) */
	TOK_COMMA,
} tok_kind;

typedef struct token {
	tok_kind kind;
	char text[512];
} token;

typedef struct parser {
	const char *s;
	size_t pos;
	char *err;
	size_t errlen;
} parser;

static void
fail(parser *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err, p->errlen, fmt, ap);
	va_end(ap);
}

/* ---- validation ----------------------------------------------------- */

static bool
is_alnum(char c)
{
	return isalnum((unsigned char)c) != 0;
}

/* valid_name: a label value or the name part of a key, non-empty. */
static bool
valid_name(const char *s, size_t n)
{
	if (n == 0 || n > NAME_MAX_LEN || !is_alnum(s[0]) ||
	    !is_alnum(s[n - 1])) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' &&
		    s[i] != '.') {
			return false;
		}
	}
	return true;
}

/* valid_prefix: a DNS-1123 subdomain (dot-separated lower-case labels
 * that start and end with a letter or digit). */
static bool
valid_prefix(const char *s, size_t n)
{
	if (n == 0 || n > PREFIX_MAX_LEN) {
		return false;
	}
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.') {
			char c = s[i];
			if (!((c >= 'a' && c <= 'z') ||
			      (c >= '0' && c <= '9') || c == '-')) {
				return false;
			}
			continue;
		}
		if (i == start || s[start] == '-' || s[i - 1] == '-') {
			return false;
		}
		start = i + 1;
	}
	return true;
}

static bool
valid_key(const char *k)
{
	const char *slash = strchr(k, '/');
	if (slash == NULL) {
		return valid_name(k, strlen(k));
	}
	return valid_prefix(k, (size_t)(slash - k)) &&
	       valid_name(slash + 1, strlen(slash + 1));
}

static bool
valid_value(const char *v)
{
	return *v == '\0' || valid_name(v, strlen(v));
}

static bool
parse_i64(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 ||
	    isspace((unsigned char)*s)) {
		return false;
	}
	*out = (int64_t)v;
	return true;
}

/* ---- requirements ---------------------------------------------------- */

static void
req_fini(requirement *r)
{
	kvi_free(r->key);
	for (size_t i = 0; i < r->nvalues; i++) {
		kvi_free(r->values[i]);
	}
	kvi_free(r->values);
}

/* req_add_value inserts v unless present (values are a set). */
static void
req_add_value(requirement *r, const char *v)
{
	for (size_t i = 0; i < r->nvalues; i++) {
		if (strcmp(r->values[i], v) == 0) {
			return;
		}
	}
	r->values =
	    kvi_reallocarray(r->values, r->nvalues + 1, sizeof(r->values[0]));
	r->values[r->nvalues++] = kvi_strdup(v);
}

static void
sel_add(kube_selector *s, requirement *r)
{
	s->reqs = kvi_reallocarray(s->reqs, s->n + 1, sizeof(s->reqs[0]));
	s->reqs[s->n++] = *r;
	memset(r, 0, sizeof(*r));
}

/* ---- label selector lexer and parser -------------------------------- */

static bool
is_special(char c)
{
	return c != '\0' && strchr("=!(),><", c) != NULL;
}

/* lex reads the next token; values_mode treats "in"/"notin" as
 * identifiers, as labels.Parse does where a value is expected. */
static void
lex(parser *p, bool values_mode, bool advance, token *t)
{
	size_t i = p->pos;
	while (isspace((unsigned char)p->s[i])) {
		i++;
	}
	t->text[0] = '\0';
	char c = p->s[i];
	if (c == '\0') {
		t->kind = TOK_END;
		snprintf(t->text, sizeof(t->text), "EOS");
	} else if (is_special(c)) {
		static const struct {
			const char *text;
			tok_kind kind;
		} sym[] = {{"!=", TOK_NE},  {"==", TOK_EQEQ}, {"!", TOK_NOT},
			   {"=", TOK_EQ},   {">", TOK_GT},    {"<", TOK_LT},
			   {"(", TOK_OPEN}, {")", TOK_CLOSE}, {",", TOK_COMMA}};
		for (size_t k = 0; k < sizeof(sym) / sizeof(sym[0]); k++) {
			size_t n = strlen(sym[k].text);
			if (strncmp(p->s + i, sym[k].text, n) == 0) {
				t->kind = sym[k].kind;
				snprintf(t->text, sizeof(t->text), "%s",
					 sym[k].text);
				i += n;
				break;
			}
		}
	} else {
		size_t start = i;
		while (p->s[i] != '\0' && !isspace((unsigned char)p->s[i]) &&
		       !is_special(p->s[i])) {
			i++;
		}
		size_t n = i - start;
		if (n >= sizeof(t->text)) {
			n = sizeof(t->text) - 1;
		}
		memcpy(t->text, p->s + start, n);
		t->text[n] = '\0';
		t->kind = TOK_ID;
		if (!values_mode && strcmp(t->text, "in") == 0) {
			t->kind = TOK_IN;
		} else if (!values_mode && strcmp(t->text, "notin") == 0) {
			t->kind = TOK_NOTIN;
		}
	}
	if (advance) {
		p->pos = i;
	}
}

static void
consume(parser *p, bool values_mode, token *t)
{
	lex(p, values_mode, true, t);
}

static void
peek(parser *p, bool values_mode, token *t)
{
	lex(p, values_mode, false, t);
}

/* parse_set reads "(a,b,...)" into r, with labels.Parse's treatment of
 * empty elements ("()" and "(a,)" hold the empty value). */
static bool
parse_set(parser *p, requirement *r)
{
	token t;
	consume(p, true, &t);
	if (t.kind != TOK_OPEN) {
		fail(p, "found '%s', expected: '('", t.text);
		return false;
	}
	peek(p, true, &t);
	if (t.kind == TOK_CLOSE) {
		consume(p, true, &t);
		req_add_value(r, "");
		return true;
	}
	if (t.kind != TOK_ID && t.kind != TOK_COMMA) {
		fail(p, "found '%s', expected: ',', ')' or identifier", t.text);
		return false;
	}
	for (;;) {
		consume(p, true, &t);
		token next;
		peek(p, true, &next);
		if (t.kind == TOK_ID) {
			req_add_value(r, t.text);
			if (next.kind == TOK_CLOSE) {
				break;
			}
			if (next.kind != TOK_COMMA) {
				fail(p, "found '%s', expected: ',' or ')'",
				     next.text);
				return false;
			}
		} else if (t.kind == TOK_COMMA) {
			if (r->nvalues == 0 || next.kind == TOK_CLOSE ||
			    next.kind == TOK_COMMA) {
				req_add_value(r, "");
			}
			if (next.kind == TOK_CLOSE) {
				break;
			}
		} else {
			fail(p, "found '%s', expected: ',', or identifier",
			     t.text);
			return false;
		}
	}
	consume(p, true, &t); /* the ')' seen by peek */
	return true;
}

/* parse_exact reads the value after =, ==, !=, > or <. */
static bool
parse_exact(parser *p, requirement *r)
{
	token t;
	peek(p, true, &t);
	if (t.kind == TOK_END || t.kind == TOK_COMMA) {
		req_add_value(r, "");
		return true;
	}
	consume(p, true, &t);
	if (t.kind != TOK_ID) {
		fail(p, "found '%s', expected: identifier", t.text);
		return false;
	}
	req_add_value(r, t.text);
	return true;
}

static bool
parse_operator(parser *p, requirement *r)
{
	token t;
	consume(p, false, &t);
	switch (t.kind) {
	case TOK_IN:
		r->op = OP_IN;
		return parse_set(p, r);
	case TOK_NOTIN:
		r->op = OP_NOTIN;
		return parse_set(p, r);
	case TOK_EQ:
	case TOK_EQEQ:
		r->op = OP_IN;
		return parse_exact(p, r);
	case TOK_NE:
		r->op = OP_NOTIN;
		return parse_exact(p, r);
	case TOK_GT:
	case TOK_LT:
		r->op = t.kind == TOK_GT ? OP_GT : OP_LT;
		if (!parse_exact(p, r)) {
			return false;
		}
		if (!parse_i64(r->values[0], &r->bound)) {
			fail(p, "unable to parse requirement: for 'Gt', 'Lt' "
				"operators, the value must be an integer");
			return false;
		}
		return true;
	default:
		fail(p, "found '%s', expected: in, notin, =, ==, !=, gt, lt",
		     t.text);
		return false;
	}
}

static bool
parse_requirement(parser *p, requirement *r)
{
	token t;
	consume(p, true, &t);
	bool not_exists = t.kind == TOK_NOT;
	if (not_exists) {
		consume(p, true, &t);
	}
	if (t.kind != TOK_ID) {
		fail(p, "found '%s', expected: identifier", t.text);
		return false;
	}
	if (!valid_key(t.text)) {
		fail(p,
		     "unable to parse requirement: key: Invalid value: "
		     "\"%s\": must be a qualified name",
		     t.text);
		return false;
	}
	r->key = kvi_strdup(t.text);
	token next;
	peek(p, true, &next);
	if (not_exists || next.kind == TOK_END || next.kind == TOK_COMMA) {
		r->op = not_exists ? OP_NOT_EXISTS : OP_EXISTS;
		return true;
	}
	if (!parse_operator(p, r)) {
		return false;
	}
	for (size_t i = 0; i < r->nvalues; i++) {
		if (!valid_value(r->values[i])) {
			fail(p,
			     "unable to parse requirement: values[%zu][%s]: "
			     "Invalid value: \"%s\": must be a valid label "
			     "value",
			     i, r->key, r->values[i]);
			return false;
		}
	}
	return true;
}

static bool
parse_labels(parser *p, kube_selector *s)
{
	for (;;) {
		token t;
		peek(p, true, &t);
		if (t.kind == TOK_END) {
			return true;
		}
		if (t.kind != TOK_ID && t.kind != TOK_NOT) {
			fail(p,
			     "found '%s', expected: !, identifier, or 'end of "
			     "string'",
			     t.text);
			return false;
		}
		requirement r = {0};
		if (!parse_requirement(p, &r)) {
			req_fini(&r);
			return false;
		}
		sel_add(s, &r);
		consume(p, true, &t);
		if (t.kind == TOK_END) {
			return true;
		}
		if (t.kind != TOK_COMMA) {
			fail(p, "found '%s', expected: ',' or 'end of string'",
			     t.text);
			return false;
		}
		peek(p, true, &t);
		if (t.kind != TOK_ID && t.kind != TOK_NOT) {
			fail(p, "found '%s', expected: identifier after ','",
			     t.text);
			return false;
		}
	}
}

/* parse_fields turns the terms of a field selector into requirements. */
static bool
parse_fields(parser *p, kube_selector *s)
{
	kube_field_term *terms;
	size_t n;
	if (kube_fields_parse(p->s, &terms, &n, p->err, p->errlen) != KVI_OK) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		requirement r = {.key = kvi_strdup(terms[i].key),
				 .op = terms[i].negated ? OP_NOTIN : OP_IN};
		req_add_value(&r, terms[i].value);
		sel_add(s, &r);
	}
	kube_fields_free(terms, n);
	return true;
}

/* ---- public --------------------------------------------------------- */

kvi_err
kube_selector_parse(const char *text, kube_selector_kind kind,
		    kube_selector **out, char *err, size_t errlen)
{
	kube_selector *s = kvi_calloc(1, sizeof(*s));
	s->kind = kind;
	parser p = {
	    .s = text != NULL ? text : "", .err = err, .errlen = errlen};
	bool ok = kind == KUBE_SELECTOR_LABELS ? parse_labels(&p, s)
					       : parse_fields(&p, s);
	if (!ok) {
		kube_selector_free(s);
		return KVI_EINVAL;
	}
	*out = s;
	return KVI_OK;
}

static bool
req_matches(const requirement *r, kube_selector_kind kind, const json_t *pod)
{
	const char *value;
	if (kind == KUBE_SELECTOR_FIELDS) {
		value = kube_fields_value(pod, r->key);
	} else {
		json_t *labels =
		    json_object_get(json_object_get(pod, "metadata"), "labels");
		value = json_string_value(json_object_get(labels, r->key));
	}
	bool in_set = false;
	for (size_t i = 0; value != NULL && i < r->nvalues; i++) {
		in_set = in_set || strcmp(value, r->values[i]) == 0;
	}
	int64_t n;
	switch (r->op) {
	case OP_IN:
		return in_set;
	case OP_NOTIN:
		return !in_set;
	case OP_EXISTS:
		return value != NULL;
	case OP_NOT_EXISTS:
		return value == NULL;
	case OP_GT:
		return value != NULL && parse_i64(value, &n) && n > r->bound;
	case OP_LT:
		return value != NULL && parse_i64(value, &n) && n < r->bound;
	}
	return false;
}

bool
kube_selector_matches(const kube_selector *s, const json_t *pod)
{
	if (pod == NULL) {
		return false;
	}
	for (size_t i = 0; s != NULL && i < s->n; i++) {
		if (!req_matches(&s->reqs[i], s->kind, pod)) {
			return false;
		}
	}
	return true;
}

bool
kube_selector_empty(const kube_selector *s)
{
	return s == NULL || s->n == 0;
}

void
kube_selector_free(kube_selector *s)
{
	if (s == NULL) {
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		req_fini(&s->reqs[i]);
	}
	kvi_free(s->reqs);
	kvi_free(s);
}
