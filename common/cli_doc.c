/*
 * cli_doc.c - a flag table rendered as its program's reference page: in
 * Markdown for the repository's documentation, in roff for a man page.
 * One walk of the table (flags_doc) and one format each (flags_style);
 * the defaults, the "--name METAVAR" of a flag and what --help says of
 * itself are cli.c's (cli_int.h), as --help shows them.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_int.h"

/* flags_range writes the range of f's value, "min..max" in the flag's
 * unit, into buf: false when it has none (a string, a switch, a callback
 * whose entry gives none). */
static bool
flags_range(const kvi_flag *f, char *buf, size_t len)
{
	bool integer =
	    f->kind >= KVI_FLAG_KIND_INT && f->kind <= KVI_FLAG_KIND_ULLONG;
	if (!integer && !(f->kind == KVI_FLAG_KIND_FN && f->min < f->max)) {
		return false;
	}
	snprintf(buf, len, "%ld..%ld", f->min, f->max);
	return true;
}

/* One entry of a reference page: a flag, or --help. */
typedef struct flags_entry {
	const char *sig;   /* "--name METAVAR" */
	const char *help;  /* "" when none */
	const char *def;   /* NULL: none */
	const char *range; /* NULL: none */
	bool first;        /* the first flag after a heading or a note */
} flags_entry;

/* A format of the reference pages: flags_doc walks the table, and the
 * format writes each part. A heading of NULL is the one of the flags
 * before any section; a heading's level is 2 among the program's flags,
 * 3 among a command's. Texts come with their length, not ended by a
 * NUL. */
typedef struct flags_style {
	void (*begin)(FILE *out, const kvi_flags *fl);
	void (*heading)(FILE *out, const char *text, size_t len, int level);
	void (*note)(FILE *out, const char *text);
	void (*flag)(FILE *out, const flags_entry *e);
	/* the start of cmd, the index-th command of fl */
	void (*command)(FILE *out, const kvi_flags *cmd, size_t index);
} flags_style;

/* flags_doc_flag writes flag f of fl; first as flags_entry says. */
static void
flags_doc_flag(FILE *out, const kvi_flags *fl, const kvi_flag *f, bool first,
	       const flags_style *st)
{
	char sig[160], def[256], range[64];
	kvi_flag_sig(f, sig, sizeof(sig));
	flags_entry e = {
	    .sig = sig,
	    .help = f->help != NULL ? f->help : "",
	    .def = kvi_flag_default(fl, f, def, sizeof(def)) ? def : NULL,
	    .range = flags_range(f, range, sizeof(range)) ? range : NULL,
	    .first = first,
	};
	st->flag(out, &e);
}

/* flags_doc_table writes the entries of fl's table, its sections as
 * headings of level, then --help. */
static void
flags_doc_table(FILE *out, const kvi_flags *fl, const flags_style *st,
		int level)
{
	bool first = true;
	for (size_t i = 0; i < fl->n; i++) {
		const kvi_flag *f = &fl->flag[i];
		if (f->kind == KVI_FLAG_KIND_SECTION) {
			/* "Heading:" in --help is "Heading" here */
			const char *h = f->help != NULL    ? f->help
					: f->title != NULL ? f->title
					: i == 0           ? "Options"
							   : "Other options";
			size_t len = strlen(h);
			st->heading(out, h,
				    len - (len > 0 && h[len - 1] == ':'),
				    level);
			first = true;
		} else if (f->kind == KVI_FLAG_KIND_NOTE) {
			st->note(out, f->help != NULL ? f->help : "");
			first = true;
		} else {
			flags_doc_flag(out, fl, f, first, st);
			first = false;
		}
	}
	st->flag(out, &(flags_entry){.sig = "--help",
				     .help = KVI_FLAGS_HELP_TEXT,
				     .first = first});
}

/* flags_doc writes fl's reference page in the format st: its flags, then
 * each of its commands with its own. */
static void
flags_doc(FILE *out, const kvi_flags *fl, const flags_style *st)
{
	st->begin(out, fl);
	if (fl->n == 0 || fl->flag[0].kind != KVI_FLAG_KIND_SECTION) {
		st->heading(out, NULL, 0, 2);
	}
	flags_doc_table(out, fl, st, 2);
	for (size_t i = 0; i < fl->n_commands; i++) {
		st->command(out, fl->commands[i], i);
		flags_doc_table(out, fl->commands[i], st, 3);
	}
}

/* flags_ends_sentence: text (n bytes) ends with a full stop of its own. */
static bool
flags_ends_sentence(const char *text, size_t n)
{
	return n > 0 && strchr(".!?", text[n - 1]) != NULL;
}

/* md_text writes n bytes of text as Markdown that shows them as they are:
 * a character that would make emphasis, code, a link, HTML, an entity,
 * math, a heading or a quote is escaped wherever it is, as is a '_' at the
 * edge of a word (inside one it is plain in GitHub's Markdown); with
 * start, so is a beginning that would make a list or the line under a
 * heading ("-", "+", "=", "1.", "1)"). A new line is a space. */
static void
md_text(FILE *out, const char *text, size_t n, bool start)
{
	size_t i = 0;
	if (start && n > 0 && strchr("-+=", text[0]) != NULL) {
		fputc('\\', out);
	}
	if (start) {
		/* "1." and "1)" begin an ordered list */
		while (i < n && text[i] >= '0' && text[i] <= '9') {
			fputc(text[i++], out);
		}
		if (i > 0 && i < n && (text[i] == '.' || text[i] == ')')) {
			fputc('\\', out);
		}
	}
	for (; i < n; i++) {
		unsigned char c = (unsigned char)text[i];
		bool word_before = i > 0 && isalnum((unsigned char)text[i - 1]);
		bool word_after =
		    i + 1 < n && isalnum((unsigned char)text[i + 1]);
		if (c == '\n') {
			c = ' ';
		} else if (strchr("\\`*[]<>&~$#|", c) != NULL ||
			   (c == '_' && !(word_before && word_after))) {
			fputc('\\', out);
		}
		fputc(c, out);
	}
}

/* md_sentence writes text, escaped, and a full stop if it has none. */
static void
md_sentence(FILE *out, const char *text)
{
	size_t n = strlen(text);
	md_text(out, text, n, false);
	fputs(flags_ends_sentence(text, n) ? "" : ".", out);
}

/* md_code writes text as a code span: between more backticks than any
 * run of them in it, and spaced from them when it begins or ends with
 * one. */
static void
md_code(FILE *out, const char *text)
{
	size_t most = 0, run = 0, n = strlen(text);
	for (size_t i = 0; i < n; i++) {
		run = text[i] == '`' ? run + 1 : 0;
		most = run > most ? run : most;
	}
	bool pad = n > 0 && (text[0] == '`' || text[n - 1] == '`');
	for (size_t i = 0; i <= most; i++) {
		fputc('`', out);
	}
	fprintf(out, "%s%s%s", pad ? " " : "", text, pad ? " " : "");
	for (size_t i = 0; i <= most; i++) {
		fputc('`', out);
	}
}

/* md_intro writes fl's title as a heading of marks ("#", "##"), its
 * summary and its synopsis. */
static void
md_intro(FILE *out, const kvi_flags *fl, const char *marks)
{
	fprintf(out, "%s ", marks);
	md_text(out, fl->prog, strlen(fl->prog), false);
	fputc('\n', out);
	if (fl->summary != NULL) {
		fputc('\n', out);
		md_text(out, fl->summary, strlen(fl->summary), true);
		fputc('\n', out);
	}
	char usage[512];
	snprintf(usage, sizeof(usage), "%s %s", fl->prog, fl->synopsis);
	fputs("\nUsage: ", out);
	md_code(out, usage);
	fputc('\n', out);
}

static void
md_begin(FILE *out, const kvi_flags *fl)
{
	fprintf(out,
		"<!-- Generated from %s's flag table: edit the table, not "
		"this page. -->\n\n",
		fl->prog);
	md_intro(out, fl, "#");
}

static void
md_command(FILE *out, const kvi_flags *cmd, size_t index)
{
	(void)index;
	fputc('\n', out);
	md_intro(out, cmd, "##");
}

static void
md_heading(FILE *out, const char *text, size_t len, int level)
{
	fputs(level > 2 ? "\n### " : "\n## ", out);
	if (text != NULL) {
		md_text(out, text, len, false);
	} else {
		fputs("Options", out);
	}
	fputc('\n', out);
}

static void
md_note(FILE *out, const char *text)
{
	fputc('\n', out);
	md_text(out, text, strlen(text), true);
	fputc('\n', out);
}

static void
md_flag(FILE *out, const flags_entry *e)
{
	fputs(e->first ? "\n- " : "- ", out);
	md_code(out, e->sig);
	const char *sep = ": "; /* before the first text */
	if (e->help[0] != '\0') {
		fputs(sep, out);
		md_sentence(out, e->help);
		sep = " ";
	}
	if (e->def != NULL) {
		fprintf(out, "%sDefault: ", sep);
		md_sentence(out, e->def);
		sep = " ";
	}
	if (e->range != NULL) {
		fprintf(out, "%sRange: ", sep);
		md_sentence(out, e->range);
	}
	fputc('\n', out);
}

void
kvi_flags_markdown(FILE *out, const kvi_flags *fl)
{
	static const flags_style md = {md_begin, md_heading, md_note, md_flag,
				       md_command};
	flags_doc(out, fl, &md);
}

/* man_text writes n bytes of text as roff shows them: a backslash is \e,
 * a hyphen \- (a minus, so that a flag copied from the page works), a
 * double quote \(dq (a macro's argument may hold it), and with start, a
 * leading dot or quote (a request) is preceded by \&. A new line is a
 * space. */
static void
man_text(FILE *out, const char *text, size_t n, bool start)
{
	if (start && n > 0 && (text[0] == '.' || text[0] == '\'')) {
		fputs("\\&", out);
	}
	for (size_t i = 0; i < n; i++) {
		switch (text[i]) {
		case '\\':
			fputs("\\e", out);
			break;
		case '-':
			fputs("\\-", out);
			break;
		case '"':
			fputs("\\(dq", out);
			break;
		case '\n':
			fputc(' ', out);
			break;
		default:
			fputc(text[i], out);
		}
	}
}

/* man_line writes text as a line of its own, with a full stop if it has
 * none. */
static void
man_line(FILE *out, const char *prefix, const char *text)
{
	size_t n = strlen(text);
	fputs(prefix, out);
	man_text(out, text, n, prefix[0] == '\0');
	fputs(flags_ends_sentence(text, n) ? "\n" : ".\n", out);
}

static void
man_begin(FILE *out, const kvi_flags *fl)
{
	char upper[128];
	size_t n = 0;
	for (; fl->prog[n] != '\0' && n + 1 < sizeof(upper); n++) {
		upper[n] = (char)toupper((unsigned char)fl->prog[n]);
	}
	fprintf(out,
		".\\\" Generated from %s's flag table: edit the table, not "
		"this page.\n.TH ",
		fl->prog);
	man_text(out, upper, n, false);
	fputs(" 1 \"\" \"kvindex\" \"User Commands\"\n.SH NAME\n", out);
	man_text(out, fl->prog, strlen(fl->prog), true);
	if (fl->summary != NULL) {
		/* the summary without its full stop */
		size_t len = strlen(fl->summary);
		fputs(" \\- ", out);
		man_text(out, fl->summary,
			 len - flags_ends_sentence(fl->summary, len), false);
	}
	fputs("\n.SH SYNOPSIS\n.B ", out);
	man_text(out, fl->prog, strlen(fl->prog), false);
	fputc('\n', out);
	man_text(out, fl->synopsis, strlen(fl->synopsis), true);
	fputc('\n', out);
	if (fl->summary != NULL) {
		fputs(".SH DESCRIPTION\n", out);
		man_line(out, "", fl->summary);
	}
	fputs(".SH OPTIONS\n", out);
}

static void
man_heading(FILE *out, const char *text, size_t len, int level)
{
	if (text == NULL) {
		return; /* the first flags are OPTIONS' own */
	}
	fputs(level > 2 ? ".PP\n\\fB" : ".SS ", out);
	man_text(out, text, len, false);
	fputs(level > 2 ? "\\fR\n" : "\n", out);
}

static void
man_command(FILE *out, const kvi_flags *cmd, size_t index)
{
	if (index == 0) {
		fputs(".SH COMMANDS\n", out);
	}
	fputs(".SS ", out);
	man_text(out, cmd->prog, strlen(cmd->prog), false);
	fputc('\n', out);
	if (cmd->summary != NULL) {
		man_line(out, "", cmd->summary);
	}
	fputs(".PP\n.B ", out);
	man_text(out, cmd->prog, strlen(cmd->prog), false);
	fputc('\n', out);
	man_text(out, cmd->synopsis, strlen(cmd->synopsis), true);
	fputc('\n', out);
}

static void
man_note(FILE *out, const char *text)
{
	fputs(".PP\n", out);
	man_line(out, "", text);
}

static void
man_flag(FILE *out, const flags_entry *e)
{
	const char *space = strchr(e->sig, ' ');
	size_t name = space != NULL ? (size_t)(space - e->sig) : strlen(e->sig);
	fputs(".TP\n\\fB", out);
	man_text(out, e->sig, name, false);
	fputs("\\fR", out);
	if (space != NULL) {
		fputs(" \\fI", out);
		man_text(out, space + 1, strlen(space + 1), false);
		fputs("\\fR", out);
	}
	fputc('\n', out);
	if (e->help[0] != '\0') {
		man_line(out, "", e->help);
	}
	if (e->def != NULL) {
		man_line(out, "Default: ", e->def);
	}
	if (e->range != NULL) {
		man_line(out, "Range: ", e->range);
	}
}

void
kvi_flags_man(FILE *out, const kvi_flags *fl)
{
	static const flags_style man = {man_begin, man_heading, man_note,
					man_flag, man_command};
	flags_doc(out, fl, &man);
}
