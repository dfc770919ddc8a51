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

/* kvi_utf8_len returns the length of the well-formed UTF-8 sequence of
 * two bytes or more at s (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF), or 0 when there is none. Stops at a NUL. */
static size_t
kvi_utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t n = c >= 0xc2 && c <= 0xdf   ? 2
		   : c >= 0xe0 && c <= 0xef ? 3
		   : c >= 0xf0 && c <= 0xf4 ? 4
					    : 0;
	unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
	unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
	for (size_t i = 1; i < n; i++) {
		if (s[i] < (i == 1 ? lo : 0x80) ||
		    s[i] > (i == 1 ? hi : 0xbf)) {
			return 0;
		}
	}
	return n;
}

/* kvi_log_quote_char writes the character at p as kvi_log_quote gives it
 * into out (4 bytes at most), sets *in to the bytes of p it took, and
 * returns the bytes it wrote. */
static size_t
kvi_log_quote_char(const unsigned char *p, char *out, size_t *in)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = *p;
	char esc = c == '\n'               ? 'n'
		   : c == '\r'             ? 'r'
		   : c == '\t'             ? 't'
		   : c == '"' || c == '\\' ? (char)c
					   : 0;
	size_t k = c >= 0x80 ? kvi_utf8_len(p) : 1;
	*in = k == 0 ? 1 : k;
	if (esc != 0) {
		out[0] = '\\';
		out[1] = esc;
		return 2;
	}
	if (c < 0x20 || c == 0x7f || k == 0) {
		out[0] = '\\';
		out[1] = 'x';
		out[2] = hex[c >> 4];
		out[3] = hex[c & 15];
		return 4;
	}
	memcpy(out, p, k);
	return k;
}

const char *
kvi_log_quote(char *buf, size_t size, const char *s)
{
	if (size < 3) {
		if (size > 0) {
			buf[0] = '\0';
		}
		return buf;
	}
	size_t o = 0;
	buf[o++] = '"';
	const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
	while (*p != '\0') {
		char one[4];
		size_t in, n = kvi_log_quote_char(p, one, &in);
		if (o + n + 2 > size) {
			break; /* keep room for the closing quote and the NUL */
		}
		memcpy(buf + o, one, n);
		o += n;
		p += in;
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
