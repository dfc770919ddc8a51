#include "log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *kvi_log_proc = "kvindex";
static kvi_log_level kvi_log_min = KVI_LOG_INFO;
static int kvi_log_fd = 2;

static const char *const kvi_level_names[] = {"debug", "info", "warn", "error"};

void
kvi_log_setup(const char *proc, kvi_log_level level, int fd)
{
	kvi_log_proc = proc;
	kvi_log_min = level;
	kvi_log_fd = fd;
}

kvi_err
kvi_log_parse_level(const char *s, kvi_log_level *out)
{
	for (int i = 0; i <= KVI_LOG_ERROR; i++) {
		if (strcmp(s, kvi_level_names[i]) == 0) {
			*out = (kvi_log_level)i;
			return KVI_OK;
		}
	}
	return KVI_EINVAL;
}

bool
kvi_log_enabled(kvi_log_level level)
{
	return level >= kvi_log_min;
}

void
kvi_log(kvi_log_level level, const char *event, const char *fmt, ...)
{
	if (level < kvi_log_min) {
		return;
	}
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line),
			 "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s "
			 "proc=%s event=%s ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			 kvi_level_names[level], kvi_log_proc, event);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n;
	if (m > 0) {
		len += (size_t)m < sizeof(line) - len - 1
			   ? (size_t)m
			   : sizeof(line) - len - 2;
	}
	line[len++] = '\n';
	ssize_t w = write(kvi_log_fd, line, len);
	(void)w;
}

const char *
kvi_log_quote(char *buf, size_t size, const char *s)
{
	size_t o = 0;
	if (size < 3) {
		if (size > 0) {
			buf[0] = '\0';
		}
		return buf;
	}
	buf[o++] = '"';
	for (; s != NULL && *s != '\0' && o + 3 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c < 0x20) {
			buf[o++] = ' ';
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

int
kvi_log_open_fd(const char *path)
{
	if (path == NULL) {
		return 2;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(path);
	}
	return fd;
}
