/*
 * cli.h - what the kvindex programs share on their command lines: integer
 * flag values checked against their range, with one message when they
 * are not; and at their start, the descriptors they may open.
 */
#ifndef KVI_COMMON_CLI_H
#define KVI_COMMON_CLI_H

/* kvi_cli_long parses s, the value of flag, as a decimal integer in
 * min..max into *out. Otherwise it prints "prog: flag: s is not a number
 * in min..max" to standard error and returns -1 (*out unchanged). */
int kvi_cli_long(const char *prog, const char *flag, const char *s, long min,
		 long max, long *out);

/* kvi_nofile_raise raises the soft limit of open descriptors to the hard
 * one: a server holds a descriptor per client and per engine socket, and
 * the default soft limit (1,024) is a small fraction of what the system
 * allows. */
void kvi_nofile_raise(void);

#endif /* KVI_COMMON_CLI_H */
