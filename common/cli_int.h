/*
 * cli_int.h - what cli.c (parsing, --help) shares with cli_doc.c (the
 * reference pages), so that a flag's default and its "--name METAVAR" are
 * written by one piece of code wherever they show. Not a public header;
 * cli.h says what the flag tables are.
 */
#ifndef KVI_COMMON_CLI_INT_H
#define KVI_COMMON_CLI_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

/* What --help says of itself, in the help and in the reference pages. */
#define KVI_FLAGS_HELP_TEXT "print this help and exit"

/* kvi_flag_default writes the default of f that the help shows into buf:
 * false when there is none. It is f->def when set, else the member's
 * value in fl->defaults unless it is 0 or NULL (an integer in the flag's
 * unit). */
bool kvi_flag_default(const kvi_flags *fl, const kvi_flag *f, char *buf,
		      size_t len);

/* kvi_flag_sig writes "--name METAVAR" (a bool: "--name") into buf and
 * returns its length, as snprintf does. */
int kvi_flag_sig(const kvi_flag *f, char *buf, size_t len);

#endif /* KVI_COMMON_CLI_INT_H */
