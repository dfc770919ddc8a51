#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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
