/*
 * test_cli_commands.c - the flag tables of a program of commands
 * (common/cli.h): the program's flags end at its command, a command's
 * arguments may come between its flags and "--" ends them; the help
 * lists the commands with their summaries; the reference pages, Markdown
 * and man, give each command's flags after the program's, whole.
 */
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

typedef struct c_opts {
	const char *server;
	int n;
	bool json;
} c_opts;

static const c_opts c_defaults = {.server = "http://x"};

static const kvi_flag c_top_flag[] = {
    {"server", "URL", "where to send it", KVI_FLAG_STR(c_opts, server)},
};

static const kvi_flag c_list_flag[] = {
    {"n", "N", "how many", KVI_FLAG_INT(c_opts, n, 1, 9)},
    {"json", NULL, "print JSON", KVI_FLAG_BOOL(c_opts, json)},
};

static const kvi_flag c_add_flag[] = {
    KVI_FLAG_SECTION("Output:"),
    {"json", NULL, "print JSON", KVI_FLAG_BOOL(c_opts, json)},
};

#define C_TABLE(f) .flag = (f), .n = sizeof(f) / sizeof((f)[0])

static const kvi_flags c_list = {
    .prog = "ctl list",
    .synopsis = "[--n N] [--json]",
    .summary = "Lists them.",
    C_TABLE(c_list_flag),
    .defaults = &c_defaults,
    .size = sizeof(c_opts),
};

static const kvi_flags c_add = {
    .prog = "ctl things add",
    .synopsis = "[--json] ID",
    .summary = "Adds one, which takes a summary long enough to be wrapped "
	       "onto a second line.",
    C_TABLE(c_add_flag),
    .defaults = &c_defaults,
    .size = sizeof(c_opts),
};

static const kvi_flags *const c_commands[] = {&c_list, &c_add};

static const kvi_flags c_top = {
    .prog = "ctl",
    .synopsis = "[--server URL] COMMAND [ARGS]",
    .summary = "A program of commands.",
    C_TABLE(c_top_flag),
    .defaults = &c_defaults,
    .size = sizeof(c_opts),
    .commands = c_commands,
    .n_commands = 2,
};

/* c_argv copies args (NULL-ended) into argv, which getopt may permute,
 * and returns their number. */
static int
c_argv(char **argv, const char *const *args)
{
	int n = 0;
	while (args[n] != NULL) {
		argv[n] = (char *)args[n];
		n++;
	}
	argv[n] = NULL;
	return n;
}

static void
test_parse_in_order(void **state)
{
	(void)state;
	char *argv[8];
	int argc =
	    c_argv(argv, (const char *const[]){"ctl", "--server", "y", "list",
					       "--n", "3", NULL});
	c_opts o;
	int first = -1;
	assert_int_equal(
	    kvi_flags_parse_args(&c_top, &o, argc, argv, true, &first), 0);
	assert_string_equal(o.server, "y");
	assert_int_equal(first, 3); /* "list": what follows is its own */
	assert_string_equal(argv[first], "list");
	assert_int_equal(kvi_flags_parse_args(&c_list, &o, argc - first,
					      argv + first, false, &first),
			 0);
	assert_int_equal(o.n, 3);
	assert_int_equal(first, 3); /* no argument: argc */
	/* no command at all */
	argc = c_argv(argv, (const char *const[]){"ctl", NULL});
	assert_int_equal(
	    kvi_flags_parse_args(&c_top, &o, argc, argv, true, &first), 0);
	assert_int_equal(first, 1);
}

static void
test_parse_arguments_between(void **state)
{
	(void)state;
	char *argv[8];
	int argc = c_argv(
	    argv, (const char *const[]){"add", "a", "--json", "b", NULL});
	c_opts o;
	int first = -1;
	assert_int_equal(
	    kvi_flags_parse_args(&c_add, &o, argc, argv, false, &first), 0);
	assert_true(o.json);
	assert_int_equal(first, 2);
	assert_string_equal(argv[2], "a");
	assert_string_equal(argv[3], "b");
	/* "--" ends the flags: "--json" after it is an argument */
	argc = c_argv(argv, (const char *const[]){"add", "--", "--json", NULL});
	assert_int_equal(
	    kvi_flags_parse_args(&c_add, &o, argc, argv, false, &first), 0);
	assert_false(o.json);
	assert_int_equal(first, 2);
	assert_string_equal(argv[first], "--json");
	assert_string_equal(kvi_flags_command(&c_top, &c_add), "things add");
	assert_string_equal(kvi_flags_command(&c_list, &c_add),
			    "ctl things add");
}

/* c_render returns what print wrote for fl (free()). */
static char *
c_render(void (*print)(FILE *, const kvi_flags *), const kvi_flags *fl)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	print(f, fl);
	fclose(f);
	return buf;
}

static void
test_usage_lists_commands(void **state)
{
	(void)state;
	char *text = c_render(kvi_flags_usage, &c_top);
	assert_string_equal(
	    text, "usage: ctl [--server URL] COMMAND [ARGS]\n"
		  "\n"
		  "  --server URL             where to send it (default: "
		  "http://x)\n"
		  "  --help                   print this help and exit\n"
		  "\n"
		  "Commands:\n"
		  "  list                     Lists them.\n"
		  "  things add               Adds one, which takes a summary "
		  "long enough to be\n"
		  "                           wrapped onto a second line.\n"
		  "\n"
		  "  ctl COMMAND --help prints the command's flags.\n");
	free(text);
	text = c_render(kvi_flags_usage, &c_list);
	assert_string_equal(text, "usage: ctl list [--n N] [--json]\n"
				  "\n"
				  "  --n N                    how many\n"
				  "  --json                   print JSON\n"
				  "  --help                   print this help "
				  "and exit\n");
	free(text);
}

static void
test_markdown_commands(void **state)
{
	(void)state;
	char *text = c_render(kvi_flags_markdown, &c_top);
	assert_string_equal(
	    text, "<!-- Generated from ctl's flag table: edit the table, not "
		  "this page. -->\n"
		  "\n"
		  "# ctl\n"
		  "\n"
		  "A program of commands.\n"
		  "\n"
		  "Usage: `ctl [--server URL] COMMAND [ARGS]`\n"
		  "\n"
		  "## Options\n"
		  "\n"
		  "- `--server URL`: where to send it. Default: http://x.\n"
		  "- `--help`: print this help and exit.\n"
		  "\n"
		  "## ctl list\n"
		  "\n"
		  "Lists them.\n"
		  "\n"
		  "Usage: `ctl list [--n N] [--json]`\n"
		  "\n"
		  "- `--n N`: how many. Range: 1..9.\n"
		  "- `--json`: print JSON.\n"
		  "- `--help`: print this help and exit.\n"
		  "\n"
		  "## ctl things add\n"
		  "\n"
		  "Adds one, which takes a summary long enough to be wrapped "
		  "onto a second line.\n"
		  "\n"
		  "Usage: `ctl things add [--json] ID`\n"
		  "\n"
		  "### Output\n"
		  "\n"
		  "- `--json`: print JSON.\n"
		  "- `--help`: print this help and exit.\n");
	free(text);
}

static void
test_man_commands(void **state)
{
	(void)state;
	char *text = c_render(kvi_flags_man, &c_top);
	const char *commands = strstr(text, ".SH COMMANDS\n");
	assert_non_null(commands);
	assert_string_equal(commands,
			    ".SH COMMANDS\n"
			    ".SS ctl list\n"
			    "Lists them.\n"
			    ".PP\n"
			    ".B ctl list\n"
			    "[\\-\\-n N] [\\-\\-json]\n"
			    ".TP\n\\fB\\-\\-n\\fR \\fIN\\fR\n"
			    "how many.\n"
			    "Range: 1..9.\n"
			    ".TP\n\\fB\\-\\-json\\fR\n"
			    "print JSON.\n"
			    ".TP\n\\fB\\-\\-help\\fR\n"
			    "print this help and exit.\n"
			    ".SS ctl things add\n"
			    "Adds one, which takes a summary long enough to be "
			    "wrapped onto a second line.\n"
			    ".PP\n"
			    ".B ctl things add\n"
			    "[\\-\\-json] ID\n"
			    ".PP\n\\fBOutput\\fR\n"
			    ".TP\n\\fB\\-\\-json\\fR\n"
			    "print JSON.\n"
			    ".TP\n\\fB\\-\\-help\\fR\n"
			    "print this help and exit.\n");
	/* and the program's own flags come before, under OPTIONS */
	assert_true(strstr(text, ".SH OPTIONS\n") < commands);
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_in_order),
	    cmocka_unit_test(test_parse_arguments_between),
	    cmocka_unit_test(test_usage_lists_commands),
	    cmocka_unit_test(test_markdown_commands),
	    cmocka_unit_test(test_man_commands),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
