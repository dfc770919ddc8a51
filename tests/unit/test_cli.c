/*
 * test_cli.c - the flag tables: an integer is taken in its range and
 * refused out of it or when not a number, with kvi_cli_long's message,
 * and stored in the member's own width (its neighbours untouched); a
 * string, a switch and a callback's flag, repeated or refused; a flag not
 * known, one without its value, an argument that is not a flag; --help;
 * and a help that lists every flag with its default. The reference
 * pages, Markdown and man, of a table with every kind of entry, whole,
 * and their escapes; --help-format, hidden from --help. Then
 * kvi_secret_read: a secret file's white space is not part of the secret,
 * and a secret that is empty, has white space or control characters
 * inside, or does not fit is refused with a reason, never cut short.
 */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"
#include "log.h"

typedef struct t_opts {
	const char *name;
	const char *module; /* NULL: a default the help quotes */
	int i;
	uint32_t u32;
	uint32_t next_u32; /* what a store too wide would overwrite */
	long l;
	long long ll;
	size_t sz;
	uint64_t u64;
	unsigned long long ull;
	size_t mb; /* bytes, given in MiB */
	bool on;
	kvi_log_level level;
	int n_tags;
	const char *tags[3];
} t_opts;

static const t_opts t_defaults = {
    .name = "dflt-name",
    .i = 7,
    .next_u32 = 0xfeedfaceu,
    .ull = 12345678901ull,
    .mb = (size_t)64 << 20,
    .level = KVI_LOG_INFO,
};

/* t_tag adds a tag; "bad" is refused, and a fourth does not fit. */
static int
t_tag(const char *prog, const kvi_flag *f, const char *arg, void *opts)
{
	t_opts *o = opts;
	if (strcmp(arg, "bad") == 0 || o->n_tags == 3) {
		fprintf(stderr, "%s: --%s: %s is refused\n", prog, f->name,
			arg);
		return -1;
	}
	o->tags[o->n_tags++] = arg;
	return 0;
}

static const kvi_flag t_flag[] = {
    {"name", "NAME", "a name", KVI_FLAG_STR(t_opts, name)},
    {"module", "WORD", "a string a module defaults",
     KVI_FLAG_STR(t_opts, module), .def = "the module's"},
    {"int", "N", "an int", KVI_FLAG_INT(t_opts, i, 1, 100)},
    {"u32", "N", "a uint32_t", KVI_FLAG_INT(t_opts, u32, 0, 4294967295L)},
    {"long", "N", "a long", KVI_FLAG_INT(t_opts, l, -(1L << 40), 1L << 40)},
    {"llong", "N", "a long long", KVI_FLAG_INT(t_opts, ll, -5, LONG_MAX)},
    {"size", "N", "a size_t", KVI_FLAG_INT(t_opts, sz, 0, LONG_MAX)},
    {"u64", "N", "a uint64_t", KVI_FLAG_INT(t_opts, u64, 0, 1L << 40)},
    {"unsigned-long-long-value", "N",
     "an unsigned long long, whose help is long enough to be wrapped onto "
     "a second line and a third",
     KVI_FLAG_INT(t_opts, ull, 0, LONG_MAX)},
    {"mb", "N", "a size in MiB", KVI_FLAG_INT(t_opts, mb, 1, 1024),
     .shift = 20},

    KVI_FLAG_SECTION("A section:"),
    {"on", NULL, "a switch", KVI_FLAG_BOOL(t_opts, on)},
    {"tag", "TAG", "a tag; repeatable", KVI_FLAG_FN(t_tag)},
    KVI_FLAG_NOTE("A note under the section."),

    KVI_FLAG_SECTION(NULL),
    {"log-level", "LEVEL", "debug, info, warn, error",
     KVI_FLAG_FN(kvi_flag_log_level), .off = offsetof(t_opts, level),
     .def = "info"},
};

static const kvi_flags t_flags = {
    .prog = "test",
    .synopsis = "[options]",
    .flag = t_flag,
    .n = sizeof(t_flag) / sizeof(t_flag[0]),
    .defaults = &t_defaults,
    .size = sizeof(t_opts),
};

/* What one parse returned and printed. */
typedef struct t_run {
	int rc;
	char out[8192], err[1024];
} t_run;

/* t_capture points descriptor fd at a fresh temporary file and returns
 * the descriptor it had. */
static int
t_capture(int fd, FILE **tmp)
{
	*tmp = tmpfile();
	assert_non_null(*tmp);
	int saved = dup(fd);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(*tmp), fd) >= 0);
	return saved;
}

/* t_restore gives fd back what it had, and reads what went into tmp. */
static void
t_restore(int fd, int saved, FILE *tmp, char *buf, size_t len)
{
	assert_true(dup2(saved, fd) >= 0);
	close(saved);
	rewind(tmp);
	size_t n = fread(buf, 1, len - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
}

/* t_parse runs kvi_flags_parse on "test" and args (NULL-ended). */
static void
t_parse(t_run *r, t_opts *o, const char *const *args)
{
	char *argv[32] = {"test"};
	int argc = 1;
	while (args[argc - 1] != NULL) {
		assert_true(argc < 31);
		argv[argc] = (char *)args[argc - 1];
		argc++;
	}
	FILE *out, *err;
	fflush(stdout);
	fflush(stderr);
	int saved_out = t_capture(1, &out), saved_err = t_capture(2, &err);
	r->rc = kvi_flags_parse(&t_flags, o, argc, argv);
	fflush(stdout);
	fflush(stderr);
	t_restore(1, saved_out, out, r->out, sizeof(r->out));
	t_restore(2, saved_err, err, r->err, sizeof(r->err));
}

#define T_PARSE(r, o, ...)                                                     \
	t_parse((r), (o), (const char *const[]){__VA_ARGS__, NULL})

static void
test_flags_defaults(void **state)
{
	(void)state;
	t_opts o;
	memset(&o, 0xa5, sizeof(o));
	t_run r;
	t_parse(&r, &o, (const char *const[]){NULL});
	assert_int_equal(r.rc, 0);
	assert_memory_equal(&o, &t_defaults, sizeof(o));
	assert_string_equal(r.err, "");
}

/* t_accepts parses --flag value and compares all of o with the defaults
 * but for what set wrote. */
static void
t_accepts(const char *flag, const char *value, void (*set)(t_opts *))
{
	t_opts o, want;
	memcpy(&want, &t_defaults, sizeof(want)); /* padding too */
	t_run r;
	T_PARSE(&r, &o, flag, value);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.err, "");
	set(&want);
	assert_memory_equal(&o, &want, sizeof(o));
}

static void
t_int_min(t_opts *o)
{
	o->i = 1;
}
static void
t_int_max(t_opts *o)
{
	o->i = 100;
}
static void
t_u32_max(t_opts *o)
{
	o->u32 = UINT32_MAX;
}
static void
t_long_min(t_opts *o)
{
	o->l = -(1L << 40);
}
static void
t_llong(t_opts *o)
{
	o->ll = -5;
}
static void
t_size(t_opts *o)
{
	o->sz = (size_t)LONG_MAX;
}
static void
t_u64(t_opts *o)
{
	o->u64 = (uint64_t)1 << 40;
}
static void
t_ull(t_opts *o)
{
	o->ull = 0;
}
static void
t_mb(t_opts *o)
{
	o->mb = (size_t)3 << 20;
}

static void
test_flags_int_in_range(void **state)
{
	(void)state;
	t_accepts("--int", "1", t_int_min);
	t_accepts("--int", "100", t_int_max);
	t_accepts("--u32", "4294967295", t_u32_max);
	t_accepts("--long", "-1099511627776", t_long_min);
	t_accepts("--llong", "-5", t_llong);
	t_accepts("--size", "9223372036854775807", t_size);
	t_accepts("--u64", "1099511627776", t_u64);
	t_accepts("--unsigned-long-long-value", "0", t_ull);
	t_accepts("--mb", "3", t_mb);
}

static void
test_flags_int_refused(void **state)
{
	(void)state;
	struct {
		const char *flag, *value, *range;
	} cases[] = {
	    {"--int", "0", "1..100"},
	    {"--int", "101", "1..100"},
	    {"--int", "x", "1..100"},
	    {"--int", "", "1..100"},
	    {"--int", "5x", "1..100"},
	    {"--int", "0x10", "1..100"},
	    {"--u32", "4294967296", "0..4294967295"},
	    {"--u32", "-1", "0..4294967295"},
	    {"--long", "1099511627777", "-1099511627776..1099511627776"},
	    {"--llong", "-6", "-5..9223372036854775807"},
	    {"--size", "9223372036854775808", "0..9223372036854775807"},
	    {"--mb", "1025", "1..1024"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		t_opts o;
		t_run r;
		T_PARSE(&r, &o, cases[i].flag, cases[i].value);
		assert_int_equal(r.rc, -1);
		char want[200];
		snprintf(want, sizeof(want),
			 "test: %s: %s is not a number in %s\n", cases[i].flag,
			 cases[i].value, cases[i].range);
		assert_string_equal(r.err, want);
	}
}

static void
test_flags_string_and_switch(void **state)
{
	(void)state;
	t_opts o;
	t_run r;
	/* a flag given twice keeps its last value; --f=v is --f v */
	T_PARSE(&r, &o, "--name", "a", "--on", "--name=b", "--module", "m");
	assert_int_equal(r.rc, 0);
	assert_string_equal(o.name, "b");
	assert_string_equal(o.module, "m");
	assert_true(o.on);
	T_PARSE(&r, &o, "--on=yes");
	assert_int_equal(r.rc, -1);
	assert_non_null(strstr(r.err, "'--on' doesn't allow an argument"));
	T_PARSE(&r, &o, "--int", "5", "--name");
	assert_int_equal(r.rc, -1);
	assert_non_null(strstr(r.err, "'--name' requires an argument"));
}

static void
test_flags_callback(void **state)
{
	(void)state;
	t_opts o;
	t_run r;
	T_PARSE(&r, &o, "--tag", "a", "--tag", "b");
	assert_int_equal(r.rc, 0);
	assert_int_equal(o.n_tags, 2);
	assert_string_equal(o.tags[0], "a");
	assert_string_equal(o.tags[1], "b");
	/* refused: its message, and no flag after it is taken */
	T_PARSE(&r, &o, "--tag", "a", "--tag", "bad", "--int", "9");
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "test: --tag: bad is refused\n");
	assert_int_equal(o.i, 7);
	T_PARSE(&r, &o, "--log-level", "debug");
	assert_int_equal(r.rc, 0);
	assert_int_equal(o.level, KVI_LOG_DEBUG);
	T_PARSE(&r, &o, "--log-level", "loud");
	assert_int_equal(r.rc, -1);
	assert_string_equal(
	    r.err, "test: --log-level: loud is not debug, info, warn or "
		   "error\n");
}

static void
test_flags_not_flags(void **state)
{
	(void)state;
	t_opts o;
	t_run r;
	T_PARSE(&r, &o, "--nope");
	assert_int_equal(r.rc, -1);
	assert_non_null(strstr(r.err, "unrecognized option '--nope'"));
	T_PARSE(&r, &o, "-i");
	assert_int_equal(r.rc, -1);
	/* an argument that is not a flag, wherever it is */
	T_PARSE(&r, &o, "--int", "5", "extra");
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "test: unexpected argument extra\n");
	T_PARSE(&r, &o, "extra", "--int", "5");
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "test: unexpected argument extra\n");
	T_PARSE(&r, &o, "--", "--int");
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "test: unexpected argument --int\n");
	/* and a parse after those starts afresh */
	T_PARSE(&r, &o, "--int", "6");
	assert_int_equal(r.rc, 0);
	assert_int_equal(o.i, 6);
}

static void
test_flags_help(void **state)
{
	(void)state;
	t_opts o;
	t_run r;
	T_PARSE(&r, &o, "--int", "5", "--help", "--nope");
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.err, "");
	const char *usage = "usage: test [options]\n\n";
	assert_int_equal(strncmp(r.out, usage, strlen(usage)), 0);
	T_PARSE(&r, &o, "--nope", "--help");
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.out, "");
}

/* t_has_all fails unless text holds each of the n strings of want. */
static void
t_has_all(const char *text, const char *const *want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (strstr(text, want[i]) == NULL) {
			fail_msg("not in: \"%s\" in:\n%s", want[i], text);
		}
	}
}

static void
test_flags_usage(void **state)
{
	(void)state;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	kvi_flags_usage(f, &t_flags);
	fclose(f);
	for (size_t i = 0; i < t_flags.n; i++) {
		const kvi_flag *fl = &t_flags.flag[i];
		char want[100];
		if (fl->name == NULL && fl->help == NULL) {
			continue; /* a blank line */
		}
		if (fl->name == NULL) {
			snprintf(want, sizeof(want), "\n  %s\n", fl->help);
		} else {
			snprintf(want, sizeof(want), "\n  --%s%s%s", fl->name,
				 fl->metavar ? " " : "",
				 fl->metavar ? fl->metavar : "");
		}
		const char *at = strstr(text, want);
		if (at == NULL || !strchr(" \n", at[strlen(want)])) {
			fail_msg("not in the help: \"%s\" in:\n%s", want, text);
		}
	}
	/* the defaults: of the defaults struct in the flag's unit, or
	 * quoted; none for a member left 0 */
	const char *defaults[] = {
	    "a name (default: dflt-name)\n",
	    "(default: the module's)\n",
	    "an int (default: 7)\n",
	    "a size in MiB (default: 64)\n",
	    "(default: info)\n",
	    /* wrapped: a default is not cut in two */
	    "a third\n                           (default: 12345678901)\n",
	    "a uint32_t\n",
	    "a long\n",
	    "a switch\n",
	    "\n  A section:\n  --on ",
	    "A note under the section.\n\n  --log-level",
	    "\n  --help ",
	};
	t_has_all(text, defaults, sizeof(defaults) / sizeof(defaults[0]));
	/* a long name has the line to itself, the help wrapped below */
	assert_non_null(strstr(text, "  --unsigned-long-long-value N\n"
				     "  "));
	for (char *line = text; *line != '\0';) {
		size_t n = strcspn(line, "\n");
		assert_true(n < 80);
		line += n + (line[n] != '\0');
	}
	free(text);
}

/* A table for the reference pages: a string with a default and one
 * without, an integer with a range and none, one stored shifted, a
 * switch, callbacks with and without a range, sections with a heading,
 * a title or neither, notes; and texts to escape. */
static const kvi_flag t_doc_flag[] = {
    {"name", "NAME", "a name", KVI_FLAG_STR(t_opts, name)},
    {"module", "WORD", "a path like C:\\dir, with `code` and *stars*",
     KVI_FLAG_STR(t_opts, module)},
    {"u32", "N", "a uint32_t, 0 by default",
     KVI_FLAG_INT(t_opts, u32, 0, 4294967295L)},

    KVI_FLAG_SECTION("Sizes and switches:"),
    {"mb", "N", "a size in MiB", KVI_FLAG_INT(t_opts, mb, 1, 1024),
     .shift = 20},
    {"on", NULL, ".a help that begins with a dot", KVI_FLAG_BOOL(t_opts, on)},
    {"tag", "TAG", "-a help that begins with a hyphen; repeatable",
     KVI_FLAG_FN(t_tag)},
    KVI_FLAG_NOTE("- not a list, nor a\\b, nor _emphasis_ or <html>."),
    KVI_FLAG_NOTE(".TH is no request, 'nor this, and 1. is no list"),

    KVI_FLAG_GROUP("Logs"),
    {"log-level", "LEVEL", "debug, info, warn, error",
     KVI_FLAG_FN(kvi_flag_log_level), .off = offsetof(t_opts, level),
     .def = "info"},

    KVI_FLAG_SECTION(NULL),
    {"port", "N", "a port, taken by a callback with a range",
     KVI_FLAG_FN(t_tag), .min = 1, .max = 65535, .def = "none"},
};

static const kvi_flags t_doc_flags = {
    .prog = "kvi-test",
    .synopsis = "--name NAME [options]",
    .summary = "A program of the tests, with *every* kind of entry.",
    .flag = t_doc_flag,
    .n = sizeof(t_doc_flag) / sizeof(t_doc_flag[0]),
    .defaults = &t_defaults,
    .size = sizeof(t_opts),
};

/* t_render returns what render writes of fl (to free). */
static char *
t_render(void (*render)(FILE *, const kvi_flags *), const kvi_flags *fl)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	render(f, fl);
	fclose(f);
	return text;
}

static void
test_flags_markdown(void **state)
{
	(void)state;
	char *text = t_render(kvi_flags_markdown, &t_doc_flags);
	assert_string_equal(
	    text,
	    "<!-- Generated from kvi-test's flag table: edit the table, not "
	    "this page. -->\n"
	    "\n"
	    "# kvi-test\n"
	    "\n"
	    "A program of the tests, with \\*every\\* kind of entry.\n"
	    "\n"
	    "Usage: `kvi-test --name NAME [options]`\n"
	    "\n"
	    "## Options\n"
	    "\n"
	    "- `--name NAME`: a name. Default: dflt-name.\n"
	    "- `--module WORD`: a path like C:\\\\dir, with \\`code\\` and "
	    "\\*stars\\*.\n"
	    "- `--u32 N`: a uint32_t, 0 by default. Range: 0..4294967295.\n"
	    "\n"
	    "## Sizes and switches\n"
	    "\n"
	    "- `--mb N`: a size in MiB. Default: 64. Range: 1..1024.\n"
	    "- `--on`: .a help that begins with a dot.\n"
	    "- `--tag TAG`: -a help that begins with a hyphen; repeatable.\n"
	    "\n"
	    "\\- not a list, nor a\\\\b, nor \\_emphasis\\_ or \\<html\\>.\n"
	    "\n"
	    ".TH is no request, 'nor this, and 1. is no list\n"
	    "\n"
	    "## Logs\n"
	    "\n"
	    "- `--log-level LEVEL`: debug, info, warn, error. Default: info.\n"
	    "\n"
	    "## Other options\n"
	    "\n"
	    "- `--port N`: a port, taken by a callback with a range. Default: "
	    "none. Range: 1..65535.\n"
	    "- `--help`: print this help and exit.\n");
	free(text);
}

static void
test_flags_markdown_escapes(void **state)
{
	(void)state;
	/* a note that begins like a numbered list, a heading or a quote;
	 * a signature with backticks in a longer code span */
	static const kvi_flag f[] = {
	    KVI_FLAG_NOTE("12. not a list"),
	    KVI_FLAG_NOTE("# not a heading"),
	    KVI_FLAG_NOTE("> not a quote, $not math$ ~nor struck~"),
	    {"tick", "`X`", "a metavar with ``backticks``",
	     KVI_FLAG_STR(t_opts, module)},
	};
	kvi_flags fl = t_doc_flags;
	fl.flag = f;
	fl.n = sizeof(f) / sizeof(f[0]);
	char *text = t_render(kvi_flags_markdown, &fl);
	const char *want[] = {
	    "\n12\\. not a list\n",
	    "\n\\# not a heading\n",
	    "\n\\> not a quote, \\$not math\\$ \\~nor struck\\~\n",
	    "\n- `` --tick `X` ``: a metavar with \\`\\`backticks\\`\\`.\n",
	};
	t_has_all(text, want, sizeof(want) / sizeof(want[0]));
	free(text);
}

static void
test_flags_man(void **state)
{
	(void)state;
	char *text = t_render(kvi_flags_man, &t_doc_flags);
	assert_string_equal(
	    text,
	    ".\\\" Generated from kvi-test's flag table: edit the table, not "
	    "this page.\n"
	    ".TH KVI\\-TEST 1 \"\" \"kvindex\" \"User Commands\"\n"
	    ".SH NAME\n"
	    "kvi\\-test \\- A program of the tests, with *every* kind of "
	    "entry\n"
	    ".SH SYNOPSIS\n"
	    ".B kvi\\-test\n"
	    "\\-\\-name NAME [options]\n"
	    ".SH DESCRIPTION\n"
	    "A program of the tests, with *every* kind of entry.\n"
	    ".SH OPTIONS\n"
	    ".TP\n\\fB\\-\\-name\\fR \\fINAME\\fR\n"
	    "a name.\nDefault: dflt\\-name.\n"
	    ".TP\n\\fB\\-\\-module\\fR \\fIWORD\\fR\n"
	    "a path like C:\\edir, with `code` and *stars*.\n"
	    ".TP\n\\fB\\-\\-u32\\fR \\fIN\\fR\n"
	    "a uint32_t, 0 by default.\nRange: 0..4294967295.\n"
	    ".SS Sizes and switches\n"
	    ".TP\n\\fB\\-\\-mb\\fR \\fIN\\fR\n"
	    "a size in MiB.\nDefault: 64.\nRange: 1..1024.\n"
	    ".TP\n\\fB\\-\\-on\\fR\n"
	    "\\&.a help that begins with a dot.\n"
	    ".TP\n\\fB\\-\\-tag\\fR \\fITAG\\fR\n"
	    "\\-a help that begins with a hyphen; repeatable.\n"
	    ".PP\n"
	    "\\- not a list, nor a\\eb, nor _emphasis_ or <html>.\n"
	    ".PP\n"
	    "\\&.TH is no request, 'nor this, and 1. is no list.\n"
	    ".SS Logs\n"
	    ".TP\n\\fB\\-\\-log\\-level\\fR \\fILEVEL\\fR\n"
	    "debug, info, warn, error.\nDefault: info.\n"
	    ".SS Other options\n"
	    ".TP\n\\fB\\-\\-port\\fR \\fIN\\fR\n"
	    "a port, taken by a callback with a range.\nDefault: none.\n"
	    "Range: 1..65535.\n"
	    ".TP\n\\fB\\-\\-help\\fR\n"
	    "print this help and exit.\n");
	free(text);
}

static void
test_flags_help_format(void **state)
{
	(void)state;
	t_opts o;
	t_run r;
	/* what --help-format prints is the page, and the parse stops */
	T_PARSE(&r, &o, "--help-format=markdown", "--nope");
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.err, "");
	char *md = t_render(kvi_flags_markdown, &t_flags);
	assert_string_equal(r.out, md);
	free(md);
	T_PARSE(&r, &o, "--help-format", "man");
	assert_int_equal(r.rc, 1);
	char *man = t_render(kvi_flags_man, &t_flags);
	assert_string_equal(r.out, man);
	free(man);
	T_PARSE(&r, &o, "--help-format=html");
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.out, "");
	assert_string_equal(
	    r.err, "test: --help-format: html is not markdown or man\n");
	/* it is hidden: --help does not name it, the pages neither */
	T_PARSE(&r, &o, "--help");
	assert_int_equal(r.rc, 1);
	assert_null(strstr(r.out, "help-format"));
	assert_non_null(strstr(r.out, "\n  --help "));
}

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
	    cmocka_unit_test(test_flags_defaults),
	    cmocka_unit_test(test_flags_int_in_range),
	    cmocka_unit_test(test_flags_int_refused),
	    cmocka_unit_test(test_flags_string_and_switch),
	    cmocka_unit_test(test_flags_callback),
	    cmocka_unit_test(test_flags_not_flags),
	    cmocka_unit_test(test_flags_help),
	    cmocka_unit_test(test_flags_usage),
	    cmocka_unit_test(test_flags_markdown),
	    cmocka_unit_test(test_flags_markdown_escapes),
	    cmocka_unit_test(test_flags_man),
	    cmocka_unit_test(test_flags_help_format),
	    cmocka_unit_test_setup_teardown(test_white_space_around, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_length, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
