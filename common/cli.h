/*
 * cli.h - what the kvindex programs share on their command lines: one
 * table of flags per program, from which come its getopt_long options, its
 * --help, its reference page (Markdown) and its man page, and the checks
 * of its values; integer flag values checked against their range, with
 * one message when they are not; secrets read from files; and at their
 * start, the descriptors they may open.
 *
 * A flag is written once, as one kvi_flag in a constant array: its name,
 * the word standing for its value in --help (the metavar), its help, and
 * where its value goes. The value goes into the program's options struct
 * at an offset (offsetof), not through a pointer: the table then names no
 * object, fills any instance of the struct (a test's as well as main's),
 * and --help reads the defaults from a second, constant instance.
 * kvi_flags_parse starts from a copy of that instance, so that what --help
 * calls a flag's default is the value in force when the flag is not given.
 *
 * The macros that fill an entry take the struct type and the member, and
 * pick the kind from the member's C type (_Generic): an int member is
 * stored as an int, a size_t one as a size_t, and a member of a type the
 * table does not know does not compile. Integer values are decimal, in
 * min..max (longs), refused with kvi_cli_long's message, and stored
 * shifted left by shift bits (a flag in MiB, a member in bytes). A flag
 * that needs code - one that accumulates when repeated, sets two members
 * or translates its value - has a callback that gets the whole struct;
 * the others, given twice, keep the last value.
 *
 * Entries without a name are text of the help: a section (a blank line,
 * then its heading if it has one) or a note (a paragraph). A flag's help
 * ends with "(default: X)", where X is the entry's def when set, else the
 * member's value in the defaults unless it is 0 or NULL (an integer in the
 * flag's unit): a default that a module applies to a member left 0 is
 * quoted in def. A default that depends on the machine (its host name,
 * its open-file limit) is quoted in def as the rule, never as the value.
 *
 * The same table renders as a reference page, in Markdown or as a man
 * page (roff, section 1): the program's summary, its synopsis, then every
 * section under a heading - its help without the colon, else its title,
 * else "Other options"; the flags before the first section are the
 * "Options" - each note as a paragraph, and each flag with its help, the
 * default --help shows and, for an integer, its range min..max in the
 * flag's unit. The pages hold nothing of the machine that made them, so
 * that a page committed can be compared with the one a build makes.
 *
 * Parsing is getopt_long's: --flag=value is --flag value, and a flag may
 * be shortened to a prefix that no other flag has. Its state is global:
 * one thread at a time. String values point into argv. --help, and the
 * hidden --help-format=markdown and --help-format=man that print the
 * reference page and the man page, are returned to the caller rather
 * than exiting, so that a test can see them.
 */
#ifndef KVI_COMMON_CLI_H
#define KVI_COMMON_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "error.h"

/* kvi_cli_long parses s, the value of flag, as a decimal integer in
 * min..max into *out. Otherwise it prints "prog: flag: s is not a number
 * in min..max" to standard error and returns -1 (*out unchanged). */
int kvi_cli_long(const char *prog, const char *flag, const char *s, long min,
		 long max, long *out);

typedef enum kvi_flag_kind {
	KVI_FLAG_KIND_SECTION, /* help text: a blank line, then help if any */
	KVI_FLAG_KIND_NOTE,    /* help text: a paragraph */
	KVI_FLAG_KIND_STRING,  /* const char *, pointing into argv */
	KVI_FLAG_KIND_BOOL,    /* bool, set true; the flag takes no value */
	KVI_FLAG_KIND_INT,     /* the integers, by the member's C type */
	KVI_FLAG_KIND_LONG,
	KVI_FLAG_KIND_LLONG,
	KVI_FLAG_KIND_UINT,
	KVI_FLAG_KIND_ULONG,
	KVI_FLAG_KIND_ULLONG,
	KVI_FLAG_KIND_FN, /* the callback fn takes the value */
} kvi_flag_kind;

typedef struct kvi_flag kvi_flag;

/* A kvi_flag_fn takes arg, the value of flag f, into opts, the options
 * struct, and returns 0; or it prints "prog: --name: why" to standard
 * error and returns -1. f->off, min and max are the callback's to use. */
typedef int (*kvi_flag_fn)(const char *prog, const kvi_flag *f, const char *arg,
			   void *opts);

struct kvi_flag {
	const char *name;    /* without the dashes; NULL: help text */
	const char *metavar; /* its value in --help ("N"); NULL: a bool */
	const char *help;    /* what it does, without the default */
	kvi_flag_kind kind;
	size_t off;     /* of the member in the options struct */
	long min, max;  /* of an integer value */
	unsigned shift; /* an integer is stored as value << shift */
	kvi_flag_fn fn;
	const char *def; /* the default --help shows; NULL: the member's */
	/* a section's heading in the reference pages when it has none in
	 * --help (there it is only a blank line) */
	const char *title;
};

/* The kind of an integer member m (an expression never evaluated). */
// clang-format off
#define KVI_FLAG_INT_KIND(m)                                                   \
	_Generic((m),                                                          \
	    int: KVI_FLAG_KIND_INT,                                            \
	    long: KVI_FLAG_KIND_LONG,                                          \
	    long long: KVI_FLAG_KIND_LLONG,                                    \
	    unsigned: KVI_FLAG_KIND_UINT,                                      \
	    unsigned long: KVI_FLAG_KIND_ULONG,                                \
	    unsigned long long: KVI_FLAG_KIND_ULLONG)

/* The rest of an entry after its name, metavar and help, for a member of
 * struct type T: {"workers", "N", "requests at once", KVI_FLAG_INT(opts,
 * workers, 1, 256)}; more fields (.def, .shift) may follow. */
#define KVI_FLAG_INT(T, member, lo, hi)                                        \
	.kind = KVI_FLAG_INT_KIND(((T *)0)->member),                           \
	.off = offsetof(T, member), .min = (lo), .max = (hi)
#define KVI_FLAG_STR(T, member)                                                \
	.kind = _Generic(((T *)0)->member, const char *: KVI_FLAG_KIND_STRING), \
	.off = offsetof(T, member)
#define KVI_FLAG_BOOL(T, member)                                               \
	.kind = _Generic(((T *)0)->member, bool: KVI_FLAG_KIND_BOOL),          \
	.off = offsetof(T, member)
#define KVI_FLAG_FN(callback) .kind = KVI_FLAG_KIND_FN, .fn = (callback)

/* Whole entries of help text; a section's heading may be NULL. A group is
 * a section without a heading in --help, titled t in the reference pages. */
#define KVI_FLAG_SECTION(h) {.kind = KVI_FLAG_KIND_SECTION, .help = (h)}
#define KVI_FLAG_GROUP(t)   {.kind = KVI_FLAG_KIND_SECTION, .title = (t)}
#define KVI_FLAG_NOTE(text)    {.kind = KVI_FLAG_KIND_NOTE, .help = (text)}
// clang-format on

/* A program's flags. A program of commands (kvindexctl: "prog [flags]
 * COMMAND [its flags and arguments]") lists each command's own table in
 * commands, whose prog is the program's followed by the command's words
 * ("kvindexctl shards add"): its help lists them, and its reference pages
 * give each one's flags after its own. */
typedef struct kvi_flags {
	const char *prog;     /* begins every message */
	const char *synopsis; /* "usage: prog synopsis" */
	const char *summary;  /* what the program is, in one sentence */
	const kvi_flag *flag;
	size_t n;
	const void *defaults; /* an options struct holding the defaults */
	size_t size;          /* the size of an options struct */
	const struct kvi_flags *const *commands; /* NULL: none */
	size_t n_commands;
} kvi_flags;

/* kvi_flags_parse copies fl->defaults into opts, then takes the flags of
 * argv into it. It returns 0; or 1 after --help, having printed the help
 * to standard output (the program should exit 0), or after
 * --help-format=markdown or --help-format=man, having printed the
 * reference page or the man page there instead; or -1 for a flag it does
 * not know or without its value (getopt_long says which), a value refused
 * (not a number in range, or by its callback; a --help-format that is
 * neither) or an argument that is not a flag, having said so on standard
 * error. Flags after --help or after the first error are not read. opts
 * may then be half-filled (the strings a callback made are its own to
 * free). It resets getopt_long, and may be called again. */
int kvi_flags_parse(const kvi_flags *fl, void *opts, int argc, char **argv);

/* kvi_flags_parse_args is kvi_flags_parse for a command line that has
 * arguments besides its flags. With in_order, the flags end at the first
 * argument (a program of commands: the command and what follows it are
 * the command's); without, arguments may come between flags, and
 * getopt_long moves them after the flags in argv. Either way "--" ends
 * the flags, and *first gets the index in argv of the first argument
 * (argc when there is none). It returns as kvi_flags_parse. */
int kvi_flags_parse_args(const kvi_flags *fl, void *opts, int argc, char **argv,
			 bool in_order, int *first);

/* kvi_flags_command returns the words of command cmd of fl, its prog
 * without fl's ("shards add" of "kvindexctl shards add"). */
const char *kvi_flags_command(const kvi_flags *fl, const kvi_flags *cmd);

/* kvi_flags_usage prints fl's help to f: the synopsis, then each entry of
 * the table, the help of every flag from the same column and wrapped
 * before the 80th, then --help; then its commands, each with its
 * summary, and how to see a command's help. */
void kvi_flags_usage(FILE *f, const kvi_flags *fl);

/* kvi_flags_markdown prints fl's reference page to f, in Markdown (GitHub
 * flavoured): a title, the summary, the synopsis, then each section as a
 * "##" heading, each note as a paragraph and each flag as an item of a
 * list, "`--name METAVAR`: help. Default: X. Range: min..max.", then
 * --help; then each command under a "##" heading of its own (its prog),
 * with its summary, its synopsis and its flags, its sections "###".
 * Text is escaped: it never makes emphasis, code, links, HTML, lists or
 * headings of its own. */
void kvi_flags_markdown(FILE *f, const kvi_flags *fl);

/* kvi_flags_man prints fl's man page to f, in roff (section 1, the man
 * macros): NAME, SYNOPSIS, DESCRIPTION (the summary), then OPTIONS, each
 * section a .SS, each note a .PP and each flag a .TP with its help, its
 * default and its range, then --help; then COMMANDS, each command a .SS
 * with its summary, its synopsis and its flags, its sections in bold. A
 * backslash, a hyphen and a line's leading dot or quote are escaped; it
 * has no date. */
void kvi_flags_man(FILE *f, const kvi_flags *fl);

/* kvi_flag_number parses arg, the value of flag f, as kvi_cli_long does
 * with f's name and range; for callbacks. */
int kvi_flag_number(const char *prog, const kvi_flag *f, const char *arg,
		    long *out);

/* kvi_flag_log_level is the callback of a --log-level flag: "debug",
 * "info", "warn" or "error" into the kvi_log_level at f->off. */
int kvi_flag_log_level(const char *prog, const kvi_flag *f, const char *arg,
		       void *opts);

/* kvi_secret_read reads a secret (a bearer token, a shared key) from the
 * file at path into out (room for len bytes with the NUL), without the
 * white space around it: a file written by `echo` ends in a newline, and a
 * client never sends it. A secret must be one word of printable ASCII
 * that fits: KVI_EINVAL for an empty one, one with white space or control
 * characters inside, or one of len bytes or more (never cut short);
 * KVI_EIO when the file cannot be read. err says which. */
kvi_err kvi_secret_read(const char *path, char *out, size_t len, char *err,
			size_t errlen);

/* kvi_nofile_raise raises the soft limit of open descriptors to the hard
 * one: a server holds a descriptor per client and per engine socket, and
 * the default soft limit (1,024) is a small fraction of what the system
 * allows. It logs both limits and returns the soft one now in force. */
long kvi_nofile_raise(void);

/* kvi_open_files returns how many descriptors this process has open (the
 * limit when none is left even to count them; -1 when unknown) and
 * writes its soft limit into *limit (-1 when unknown). */
long kvi_open_files(long *limit);

#endif /* KVI_COMMON_CLI_H */
