/*
 * cli.h - what the kvindex programs share on their command lines: integer
 * flag values checked against their range, with one message when they
 * are not.
 */
#ifndef KVI_COMMON_CLI_H
#define KVI_COMMON_CLI_H

/* kvi_cli_long parses s, the value of flag, as a decimal integer in
 * min..max into *out. Otherwise it prints "prog: flag: s is not a number
 * in min..max" to standard error and returns -1 (*out unchanged). */
int kvi_cli_long(const char *prog, const char *flag, const char *s, long min,
		 long max, long *out);

#endif /* KVI_COMMON_CLI_H */
