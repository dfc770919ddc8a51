/*
 * cli.h - what the kvindex programs share on their command lines: integer
 * flag values checked against their range, with one message when they
 * are not; secrets read from files; and at their start, the descriptors
 * they may open.
 */
#ifndef KVI_COMMON_CLI_H
#define KVI_COMMON_CLI_H

#include <stddef.h>

#include "error.h"

/* kvi_cli_long parses s, the value of flag, as a decimal integer in
 * min..max into *out. Otherwise it prints "prog: flag: s is not a number
 * in min..max" to standard error and returns -1 (*out unchanged). */
int kvi_cli_long(const char *prog, const char *flag, const char *s, long min,
		 long max, long *out);

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
