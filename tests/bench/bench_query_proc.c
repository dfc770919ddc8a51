/*
 * bench_query_proc.c - CPU times, PATH look-ups, port files and the serve
 * loop of bench_query's servers (bench_query_proc.h).
 */
#include "bench_query_proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "kvitest.h"

uint64_t
bq_cpu_ns(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		return 0;
	}
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces: fields count from its ')' */
	char *p = strrchr(buf, ')');
	unsigned long long utime = 0, stime = 0;
	if (p == NULL || sscanf(p + 1,
				" %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
				"%*u %llu %llu",
				&utime, &stime) != 2) {
		return 0;
	}
	long hz = sysconf(_SC_CLK_TCK);
	return (utime + stime) * (1000000000ull / (uint64_t)hz);
}

char *
bq_which(const char *name)
{
	const char *path = getenv("PATH");
	if (path == NULL) {
		path = "/usr/local/bin:/usr/bin:/bin";
	}
	while (*path != '\0') {
		size_t len = strcspn(path, ":");
		char *cand = kvi_malloc(len + strlen(name) + 2);
		snprintf(cand, len + strlen(name) + 2, "%.*s/%s", (int)len,
			 path, name);
		if (len > 0 && access(cand, X_OK) == 0) {
			return cand;
		}
		kvi_free(cand);
		path += len + (path[len] == ':');
	}
	return NULL;
}

int
bq_port_file_wait(const char *path, int timeout_ms)
{
	if (!kvt_wait_file(path, timeout_ms)) {
		return -1;
	}
	char *text = kvt_file_read(path, NULL);
	int port = text != NULL ? atoi(text) : -1;
	kvi_free(text);
	return port > 0 ? port : -1;
}

static bool
port_file_write(const char *path, int port)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL) {
		return false;
	}
	fprintf(f, "%d\n", port);
	return fclose(f) == 0 && rename(tmp, path) == 0;
}

int
bq_serve(kvi_httpd *h, int threads, const char *port_file)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	char err[256];
	if (kvi_httpd_start(h, "127.0.0.1:0", threads, err, sizeof(err)) !=
	    KVI_OK) {
		fprintf(stderr, "serve: %s\n", err);
		kvi_httpd_free(h);
		return 1;
	}
	if (!port_file_write(port_file, kvi_httpd_port(h))) {
		fprintf(stderr, "serve: cannot write %s\n", port_file);
		kvi_httpd_free(h);
		return 1;
	}
	int sig;
	sigwait(&set, &sig);
	kvi_httpd_stop(h);
	kvi_httpd_free(h);
	return 0;
}
