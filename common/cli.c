#include "cli.h"
#include "cli_int.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "alloc.h"
#include "log.h"

int
kvi_cli_long(const char *prog, const char *flag, const char *s, long min,
	     long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || v < min || v > max) {
		fprintf(stderr, "%s: %s: %s is not a number in %ld..%ld\n",
			prog, flag, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int
kvi_flag_number(const char *prog, const kvi_flag *f, const char *arg, long *out)
{
	char flag[128];
	snprintf(flag, sizeof(flag), "--%s", f->name);
	return kvi_cli_long(prog, flag, arg, f->min, f->max, out);
}

int
kvi_flag_log_level(const char *prog, const kvi_flag *f, const char *arg,
		   void *opts)
{
	if (kvi_log_parse_level(
		arg, (kvi_log_level *)((char *)opts + f->off)) != KVI_OK) {
		fprintf(stderr,
			"%s: --%s: %s is not debug, info, warn or error\n",
			prog, f->name, arg);
		return -1;
	}
	return 0;
}

/* getopt_long's values for --help and --help-format, and for the table's
 * flag i, FLAGS_TABLE plus i: above every character, so that none is
 * taken for a flag. */
#define FLAGS_HELP        256
#define FLAGS_HELP_FORMAT 257
#define FLAGS_TABLE       258

/* flags_store writes v << f->shift into the integer member at p. The
 * range of the flag is within the member's type. */
static void
flags_store(const kvi_flag *f, void *p, long v)
{
	long long x = (long long)v * (1LL << f->shift);
	switch (f->kind) {
	case KVI_FLAG_KIND_INT:
		*(int *)p = (int)x;
		break;
	case KVI_FLAG_KIND_LONG:
		*(long *)p = (long)x;
		break;
	case KVI_FLAG_KIND_LLONG:
		*(long long *)p = x;
		break;
	case KVI_FLAG_KIND_UINT:
		*(unsigned *)p = (unsigned)x;
		break;
	case KVI_FLAG_KIND_ULONG:
		*(unsigned long *)p = (unsigned long)x;
		break;
	default:
		*(unsigned long long *)p = (unsigned long long)x;
		break;
	}
}

/* flags_load reads the integer member at p, in the flag's unit. */
static long long
flags_load(const kvi_flag *f, const void *p)
{
	long long x;
	switch (f->kind) {
	case KVI_FLAG_KIND_INT:
		x = *(const int *)p;
		break;
	case KVI_FLAG_KIND_LONG:
		x = *(const long *)p;
		break;
	case KVI_FLAG_KIND_LLONG:
		x = *(const long long *)p;
		break;
	case KVI_FLAG_KIND_UINT:
		x = *(const unsigned *)p;
		break;
	case KVI_FLAG_KIND_ULONG:
		x = (long long)*(const unsigned long *)p;
		break;
	default:
		x = (long long)*(const unsigned long long *)p;
		break;
	}
	return x / (1LL << f->shift);
}

/* flags_take takes arg, the value of flag f, into opts: 0, or -1 having
 * said why. */
static int
flags_take(const kvi_flags *fl, const kvi_flag *f, const char *arg, void *opts)
{
	char *p = (char *)opts + f->off;
	long v;
	switch (f->kind) {
	case KVI_FLAG_KIND_STRING:
		*(const char **)p = arg;
		return 0;
	case KVI_FLAG_KIND_BOOL:
		*(bool *)p = true;
		return 0;
	case KVI_FLAG_KIND_FN:
		return f->fn(fl->prog, f, arg, opts);
	case KVI_FLAG_KIND_SECTION:
	case KVI_FLAG_KIND_NOTE:
		return -1; /* never an option */
	default:
		if (kvi_flag_number(fl->prog, f, arg, &v) != 0) {
			return -1;
		}
		flags_store(f, p, v);
		return 0;
	}
}

/* flags_longopts makes getopt_long's table of fl's flags, --help and
 * --help-format. */
static struct option *
flags_longopts(const kvi_flags *fl)
{
	struct option *lo = kvi_calloc(fl->n + 3, sizeof(*lo));
	size_t k = 0;
	for (size_t i = 0; i < fl->n; i++) {
		const kvi_flag *f = &fl->flag[i];
		if (f->name != NULL) {
			lo[k++] = (struct option){f->name,
						  f->kind == KVI_FLAG_KIND_BOOL
						      ? no_argument
						      : required_argument,
						  NULL, FLAGS_TABLE + (int)i};
		}
	}
	lo[k++] = (struct option){"help", no_argument, NULL, FLAGS_HELP};
	lo[k] = (struct option){"help-format", required_argument, NULL,
				FLAGS_HELP_FORMAT};
	return lo;
}

/* flags_help_format prints the page --help-format=format asks for: 1, or
 * -1 having said that there is no such format. */
static int
flags_help_format(const kvi_flags *fl, const char *format)
{
	if (strcmp(format, "markdown") == 0) {
		kvi_flags_markdown(stdout, fl);
	} else if (strcmp(format, "man") == 0) {
		kvi_flags_man(stdout, fl);
	} else {
		fprintf(stderr,
			"%s: --help-format: %s is not markdown or man\n",
			fl->prog, format);
		return -1;
	}
	return 1;
}

/* flags_parse takes the flags of argv into opts as kvi_flags_parse does,
 * with getopt_long's optstring: "" permutes, "+" stops at the first
 * argument. optind is then the index of the first argument. */
static int
flags_parse(const kvi_flags *fl, void *opts, int argc, char **argv,
	    const char *optstring)
{
	memcpy(opts, fl->defaults, fl->size);
	struct option *lo = flags_longopts(fl);
	int rc = 0, c;
	optind = 0; /* glibc and musl: start again, from argv[1] */
	while (rc == 0 &&
	       (c = getopt_long(argc, argv, optstring, lo, NULL)) != -1) {
		size_t i = (size_t)(c - FLAGS_TABLE);
		if (c == FLAGS_HELP) {
			kvi_flags_usage(stdout, fl);
			rc = 1;
		} else if (c == FLAGS_HELP_FORMAT) {
			rc = flags_help_format(fl, optarg);
		} else if (c >= FLAGS_TABLE && i < fl->n) {
			rc = flags_take(fl, &fl->flag[i], optarg, opts);
		} else {
			rc = -1; /* getopt_long said what */
		}
	}
	kvi_free(lo);
	return rc;
}

int
kvi_flags_parse(const kvi_flags *fl, void *opts, int argc, char **argv)
{
	int rc = flags_parse(fl, opts, argc, argv, "");
	if (rc == 0 && optind < argc) {
		fprintf(stderr, "%s: unexpected argument %s\n", fl->prog,
			argv[optind]);
		rc = -1;
	}
	return rc;
}

int
kvi_flags_parse_args(const kvi_flags *fl, void *opts, int argc, char **argv,
		     bool in_order, int *first)
{
	int rc = flags_parse(fl, opts, argc, argv, in_order ? "+" : "");
	*first = optind < argc ? optind : argc;
	return rc;
}

const char *
kvi_flags_command(const kvi_flags *fl, const kvi_flags *cmd)
{
	size_t n = strlen(fl->prog);
	return strncmp(cmd->prog, fl->prog, n) == 0 && cmd->prog[n] == ' '
		   ? cmd->prog + n + 1
		   : cmd->prog;
}

/* Where a flag's help starts, and the width it is wrapped to. */
#define FLAGS_HELP_COL 27
#define FLAGS_WIDTH    79

/* flags_put prints the w bytes of word at column col, first going to a
 * new line at column indent when it does not fit on this one before
 * FLAGS_WIDTH; returns the column after it. */
static int
flags_put(FILE *f, int col, int indent, const char *word, int w)
{
	bool fresh = col <= indent; /* no word yet on this line */
	if (!fresh && col + 1 + w > FLAGS_WIDTH) {
		fprintf(f, "\n%*s", indent, "");
		col = indent;
		fresh = true;
	}
	fprintf(f, "%s%.*s", fresh ? "" : " ", w, word);
	return col + w + !fresh;
}

/* flags_wrap prints the words of text from column col, as flags_put
 * does, and returns the column after them. With whole, text that fits on
 * a line is one word: "(default: 30000)" is not cut in two. */
static int
flags_wrap(FILE *f, int col, int indent, const char *text, bool whole)
{
	int len = (int)strlen(text);
	if (whole && indent + len <= FLAGS_WIDTH) {
		return flags_put(f, col, indent, text, len);
	}
	for (const char *p = text; *p != '\0';) {
		if (*p == ' ') {
			p++;
			continue;
		}
		int w = (int)strcspn(p, " ");
		col = flags_put(f, col, indent, p, w);
		p += w;
	}
	return col;
}

bool
kvi_flag_default(const kvi_flags *fl, const kvi_flag *f, char *buf, size_t len)
{
	const char *p = (const char *)fl->defaults + f->off;
	if (f->def != NULL) {
		snprintf(buf, len, "%s", f->def);
	} else if (f->kind == KVI_FLAG_KIND_STRING) {
		const char *s = *(const char *const *)p;
		if (s == NULL) {
			return false;
		}
		snprintf(buf, len, "%s", s);
	} else if (f->kind >= KVI_FLAG_KIND_INT &&
		   f->kind <= KVI_FLAG_KIND_ULLONG) {
		long long v = flags_load(f, p);
		if (v == 0) {
			return false;
		}
		snprintf(buf, len, "%lld", v);
	} else {
		return false;
	}
	return true;
}

int
kvi_flag_sig(const kvi_flag *f, char *buf, size_t len)
{
	return snprintf(buf, len, "--%s%s%s", f->name, f->metavar ? " " : "",
			f->metavar ? f->metavar : "");
}

/* flags_usage_flag prints the lines of flag f. */
static void
flags_usage_flag(FILE *out, const kvi_flags *fl, const kvi_flag *f)
{
	char sig[160];
	kvi_flag_sig(f, sig, sizeof(sig));
	int col = fprintf(out, "  %s", sig);
	if (col + 2 > FLAGS_HELP_COL) {
		fputc('\n', out);
		col = 0;
	}
	fprintf(out, "%*s", FLAGS_HELP_COL - col, "");
	col = flags_wrap(out, FLAGS_HELP_COL, FLAGS_HELP_COL,
			 f->help != NULL ? f->help : "", false);
	char def[256], text[300];
	if (kvi_flag_default(fl, f, def, sizeof(def))) {
		snprintf(text, sizeof(text), "(default: %s)", def);
		flags_wrap(out, col, FLAGS_HELP_COL, text, true);
	}
	fputc('\n', out);
}

/* flags_usage_commands prints the commands of fl, each with its summary
 * from the column of the flags' help. */
static void
flags_usage_commands(FILE *out, const kvi_flags *fl)
{
	if (fl->n_commands == 0) {
		return;
	}
	fputs("\nCommands:\n", out);
	for (size_t i = 0; i < fl->n_commands; i++) {
		const kvi_flags *cmd = fl->commands[i];
		int col = fprintf(out, "  %s", kvi_flags_command(fl, cmd));
		if (col + 2 > FLAGS_HELP_COL) {
			fputc('\n', out);
			col = 0;
		}
		fprintf(out, "%*s", FLAGS_HELP_COL - col, "");
		flags_wrap(out, FLAGS_HELP_COL, FLAGS_HELP_COL,
			   cmd->summary != NULL ? cmd->summary : "", false);
		fputc('\n', out);
	}
	fprintf(out, "\n  %s COMMAND --help prints the command's flags.\n",
		fl->prog);
}

void
kvi_flags_usage(FILE *out, const kvi_flags *fl)
{
	fprintf(out, "usage: %s %s\n\n", fl->prog, fl->synopsis);
	for (size_t i = 0; i < fl->n; i++) {
		const kvi_flag *f = &fl->flag[i];
		if (f->kind == KVI_FLAG_KIND_SECTION) {
			fputc('\n', out);
		}
		if (f->name != NULL) {
			flags_usage_flag(out, fl, f);
		} else if (f->help != NULL) {
			fputs("  ", out);
			flags_wrap(out, 2, 2, f->help, false);
			fputc('\n', out);
		}
	}
	fprintf(out, "  --help%*s%s\n", FLAGS_HELP_COL - 8, "",
		KVI_FLAGS_HELP_TEXT);
	flags_usage_commands(out, fl);
}

static bool
kvi_is_space(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

kvi_err
kvi_secret_read(const char *path, char *out, size_t len, char *err,
		size_t errlen)
{
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return KVI_EIO;
	}
	/* a byte more than fits, to see a file that does not */
	char *buf = malloc(len + 1);
	size_t n = buf != NULL ? fread(buf, 1, len + 1, f) : 0;
	bool failed = buf == NULL || ferror(f);
	fclose(f);
	if (failed) {
		snprintf(err, errlen, "%s: cannot be read", path);
		free(buf);
		return KVI_EIO;
	}
	size_t lo = 0, hi = n;
	while (lo < hi && kvi_is_space((unsigned char)buf[lo])) {
		lo++;
	}
	while (hi > lo && kvi_is_space((unsigned char)buf[hi - 1])) {
		hi--;
	}
	kvi_err rv = KVI_OK;
	if (hi == lo) {
		snprintf(err, errlen, "%s: the secret is empty", path);
		rv = KVI_EINVAL;
	} else if (n > len || hi - lo >= len) {
		snprintf(err, errlen, "%s: the secret is longer than %zu bytes",
			 path, len - 1);
		rv = KVI_EINVAL;
	}
	for (size_t i = lo; rv == KVI_OK && i < hi; i++) {
		unsigned char ch = (unsigned char)buf[i];
		if (ch <= ' ' || ch >= 0x7f) {
			snprintf(err, errlen,
				 "%s: the secret has %s at byte %zu: it must "
				 "be one word of printable ASCII",
				 path,
				 kvi_is_space(ch) ? "white space"
						  : "a byte "
						    "outside "
						    "it",
				 i - lo);
			rv = KVI_EINVAL;
		}
	}
	if (rv == KVI_OK) {
		memcpy(out, buf + lo, hi - lo);
		out[hi - lo] = '\0';
	}
	free(buf);
	return rv;
}

long
kvi_nofile_raise(void)
{
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) {
		return -1;
	}
	rlim_t was = nofile.rlim_cur;
	if (nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) {
			nofile.rlim_cur = was;
		}
	}
	KVI_INFO("open_files_limit", "soft=%llu was=%llu hard=%llu",
		 (unsigned long long)nofile.rlim_cur, (unsigned long long)was,
		 (unsigned long long)nofile.rlim_max);
	return nofile.rlim_cur > (rlim_t)LONG_MAX ? LONG_MAX
						  : (long)nofile.rlim_cur;
}

long
kvi_open_files(long *limit)
{
	struct rlimit nofile;
	*limit = getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
			 nofile.rlim_cur <= (rlim_t)LONG_MAX
		     ? (long)nofile.rlim_cur
		     : -1;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL) {
		/* no descriptor left even to count them: all are in use */
		return errno == EMFILE ? *limit : -1;
	}
	long n = -1; /* the directory's own descriptor */
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		n += e->d_name[0] != '.';
	}
	closedir(d);
	return n;
}
