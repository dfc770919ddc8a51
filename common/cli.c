#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

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

void
kvi_nofile_raise(void)
{
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
	    nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
}
