#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
