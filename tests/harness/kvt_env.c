#include "kvt_env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "kvt_proc.h"

#define POLL_MS       5
#define MAX_TMPDIRS   64
#define PORT_MIN      20000
#define PORT_MAX      60000
#define PORT_ATTEMPTS 200

static char *tmpdirs[MAX_TMPDIRS];
static pthread_once_t tmp_once = PTHREAD_ONCE_INIT;

static bool
keep(void)
{
	const char *v = getenv("KVI_TEST_KEEP");
	return v != NULL && strcmp(v, "1") == 0;
}

static int
remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void
remove_tree(const char *path)
{
	if (keep()) {
		fprintf(stderr, "kvitest: kept %s\n", path);
		return;
	}
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* At exit: children first (they may still write into the directories). */
static void
remove_leftovers(void)
{
	kvt_proc_kill_all();
	for (int i = 0; i < MAX_TMPDIRS; i++) {
		if (tmpdirs[i] != NULL) {
			remove_tree(tmpdirs[i]);
			kvi_free(tmpdirs[i]);
			tmpdirs[i] = NULL;
		}
	}
}

static void
install(void)
{
	atexit(remove_leftovers);
}

kvi_err
kvt_tmpdir_make(const char *prefix, char **out)
{
	pthread_once(&tmp_once, install);
	const char *root = getenv("TMPDIR");
	if (root == NULL || *root == '\0') {
		root = "/tmp";
	}
	size_t len = strlen(root) + strlen(prefix) + 16;
	char *path = kvi_malloc(len);
	snprintf(path, len, "%s/%s-XXXXXX", root, prefix);
	if (mkdtemp(path) == NULL) {
		kvi_free(path);
		return KVI_EIO;
	}
	for (int i = 0; i < MAX_TMPDIRS; i++) {
		if (tmpdirs[i] == NULL) {
			tmpdirs[i] = kvi_strdup(path);
			break;
		}
	}
	*out = path;
	return KVI_OK;
}

void
kvt_tmpdir_remove(const char *path)
{
	remove_tree(path);
	for (int i = 0; i < MAX_TMPDIRS; i++) {
		if (tmpdirs[i] != NULL && strcmp(tmpdirs[i], path) == 0) {
			kvi_free(tmpdirs[i]);
			tmpdirs[i] = NULL;
		}
	}
}

char *
kvt_path(const char *dir, const char *name)
{
	size_t len = strlen(dir) + strlen(name) + 2;
	char *p = kvi_malloc(len);
	snprintf(p, len, "%s/%s", dir, name);
	return p;
}

char *
kvt_file_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		return NULL;
	}
	size_t cap = 4096, n = 0;
	char *buf = kvi_malloc(cap);
	size_t got;
	while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (n + 1 == cap) {
			cap *= 2;
			buf = kvi_realloc(buf, cap);
		}
	}
	fclose(f);
	buf[n] = '\0';
	if (len != NULL) {
		*len = n;
	}
	return buf;
}

void
kvt_log_tail(const char *what, const char *path, size_t max)
{
	FILE *f = path != NULL ? fopen(path, "r") : NULL;
	if (f == NULL) {
		fprintf(stderr, "--- %s: no log\n", what);
		return;
	}
	char *buf = kvi_malloc(max + 1);
	fseek(f, 0, SEEK_END);
	long end = ftell(f);
	fseek(f, end > (long)max ? end - (long)max : 0, SEEK_SET);
	size_t n = fread(buf, 1, max, f);
	buf[n] = '\0';
	fclose(f);
	fprintf(stderr, "--- %s: the end of %s\n%s\n--- end\n", what, path,
		buf);
	kvi_free(buf);
}

int64_t
kvt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
kvt_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

bool
kvt_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms)
{
	int64_t deadline = kvt_now_ms() + timeout_ms;
	for (;;) {
		if (pred(arg)) {
			return true;
		}
		if (kvt_now_ms() >= deadline) {
			return false;
		}
		kvt_sleep_ms(POLL_MS);
	}
}

static bool
file_exists(void *arg)
{
	return access((const char *)arg, F_OK) == 0;
}

bool
kvt_wait_file(const char *path, int timeout_ms)
{
	return kvt_wait_until(file_exists, (void *)path, timeout_ms);
}

/* loopback_binds says whether a TCP socket binds to host (port 0). */
static bool
loopback_binds(const char *host)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && inet_pton(AF_INET, host, &sa.sin_addr) == 1 &&
		  bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0) {
		close(fd);
	}
	return ok;
}

void
kvt_loopback_pick(char *host, size_t len)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		uint8_t r[3];
		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
			break;
		}
		/* 127.1.0.1 .. 127.254.255.254 */
		snprintf(host, len, "127.%u.%u.%u", 1u + r[0] % 254u,
			 (unsigned)r[1], 1u + r[2] % 254u);
		if (loopback_binds(host)) {
			return;
		}
	}
	snprintf(host, len, "127.0.0.1");
}

int
kvt_port_refusing(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

kvi_err
kvt_addr_pick(char *host, size_t len, int *port)
{
	kvt_loopback_pick(host, len);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && inet_pton(AF_INET, host, &sa.sin_addr) == 1 &&
		  bind(fd, (struct sockaddr *)&sa, sl) == 0 &&
		  getsockname(fd, (struct sockaddr *)&sa, &sl) == 0;
	if (fd >= 0) {
		close(fd);
	}
	if (!ok) {
		return KVI_EIO;
	}
	*port = ntohs(sa.sin_port);
	return KVI_OK;
}

static bool
range_free(int base, int n)
{
	int *fds = kvi_malloc((size_t)n * sizeof(int));
	int bound = 0;
	for (; bound < n; bound++) {
		struct sockaddr_in sa = {
		    .sin_family = AF_INET,
		    .sin_port = htons((uint16_t)(base + bound)),
		    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		fds[bound] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[bound] < 0 ||
		    bind(fds[bound], (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			if (fds[bound] >= 0) {
				close(fds[bound]);
			}
			break;
		}
	}
	for (int i = 0; i < bound; i++) {
		close(fds[i]);
	}
	kvi_free(fds);
	return bound == n;
}

/* ports_top returns where the kernel's ephemeral ports start (outgoing
 * connections take their local ports there, and one may take a port a
 * test gave a server it is about to restart), or PORT_MAX. */
static int
ports_top(void)
{
	int lo = PORT_MAX, hi = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f != NULL) {
		if (fscanf(f, "%d %d", &lo, &hi) != 2) {
			lo = PORT_MAX;
		}
		fclose(f);
	}
	return lo > PORT_MIN && lo < PORT_MAX ? lo : PORT_MAX;
}

kvi_err
kvt_ports_pick(int n, int *base)
{
	int top = ports_top();
	if (n >= top - PORT_MIN) {
		top = PORT_MAX; /* too many for below the ephemeral range */
	}
	if (n <= 0 || n >= top - PORT_MIN) {
		return KVI_EINVAL;
	}
	unsigned seed = (unsigned)kvt_now_ms() ^ (unsigned)getpid() << 8;
	for (int attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
		int b = PORT_MIN +
			(int)(rand_r(&seed) % (unsigned)(top - PORT_MIN - n));
		if (range_free(b, n)) {
			*base = b;
			return KVI_OK;
		}
	}
	return KVI_EEXIST;
}

bool
kvt_why(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return false;
}
