#include "kvt_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "kvt_env.h"

#define MAX_CHILDREN 256
#define POLL_MS      10

struct kvt_proc {
	pid_t pid;
	bool exited;
	int status;
	int slot;
};

/* The registry: process groups of running children, 0 = free. Plain
 * volatile pids so that a signal handler may read them. */
static volatile pid_t registry[MAX_CHILDREN];
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static const int fatal_signals[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE,
				    SIGILL,  SIGTERM, SIGINT, SIGHUP};

void
kvt_proc_kill_all(void)
{
	for (int i = 0; i < MAX_CHILDREN; i++) {
		pid_t pid = registry[i];
		if (pid > 0) {
			kill(-pid, SIGKILL);
		}
	}
}

static void
on_fatal_signal(int sig)
{
	kvt_proc_kill_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
install(void)
{
	atexit(kvt_proc_kill_all);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(int); i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_fatal_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(fatal_signals[i], &sa, NULL);
	}
}

static int
registry_add(pid_t pid)
{
	pthread_mutex_lock(&registry_mu);
	int slot = -1;
	for (int i = 0; i < MAX_CHILDREN && slot < 0; i++) {
		if (registry[i] == 0) {
			registry[i] = pid;
			slot = i;
		}
	}
	pthread_mutex_unlock(&registry_mu);
	return slot;
}

static void
registry_remove(int slot)
{
	if (slot >= 0) {
		pthread_mutex_lock(&registry_mu);
		registry[slot] = 0;
		pthread_mutex_unlock(&registry_mu);
	}
}

/* child_exec runs in the forked child: only async-signal-safe calls. */
static _Noreturn void
child_exec(const char *const *argv, int log_fd, pid_t parent)
{
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent) {
		_exit(127); /* the parent died before prctl */
	}
	if (log_fd >= 0) {
		dup2(log_fd, 1);
		dup2(log_fd, 2);
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

kvi_err
kvt_proc_start(const char *const *argv, const char *log_path, kvt_proc **out)
{
	pthread_once(&install_once, install);
	int log_fd = -1;
	if (log_path != NULL) {
		log_fd = open(log_path,
			      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (log_fd < 0) {
			return KVI_EIO;
		}
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		child_exec(argv, log_fd, parent);
	}
	if (log_fd >= 0) {
		close(log_fd);
	}
	if (pid < 0) {
		return KVI_EIO;
	}
	/* Also from the parent: the group exists before any kill. */
	setpgid(pid, pid);
	kvt_proc *p = kvi_calloc(1, sizeof(*p));
	p->pid = pid;
	p->slot = registry_add(pid);
	*out = p;
	return KVI_OK;
}

pid_t
kvt_proc_pid(const kvt_proc *p)
{
	return p->pid;
}

static bool
reap(kvt_proc *p, int flags)
{
	if (p->exited) {
		return true;
	}
	int st;
	pid_t r;
	do {
		r = waitpid(p->pid, &st, flags);
	} while (r < 0 && errno == EINTR);
	if (r != p->pid) {
		return false;
	}
	p->exited = true;
	p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	registry_remove(p->slot);
	p->slot = -1;
	return true;
}

bool
kvt_proc_alive(kvt_proc *p)
{
	return !reap(p, WNOHANG);
}

kvi_err
kvt_proc_wait(kvt_proc *p, int timeout_ms, int *status)
{
	for (int waited = 0;; waited += POLL_MS) {
		if (reap(p, WNOHANG)) {
			if (status != NULL) {
				*status = p->status;
			}
			return KVI_OK;
		}
		if (waited >= timeout_ms) {
			return KVI_ETIMEDOUT;
		}
		struct timespec ts = {0, POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

void
kvt_proc_kill(kvt_proc *p)
{
	if (!p->exited) {
		kill(-p->pid, SIGKILL);
		kill(p->pid, SIGKILL);
		reap(p, 0);
	}
}

kvi_err
kvt_proc_stop(kvt_proc *p, int timeout_ms, int *status)
{
	kvi_err rv = KVI_OK;
	if (!p->exited) {
		kill(-p->pid, SIGTERM);
		if (kvt_proc_wait(p, timeout_ms, NULL) != KVI_OK) {
			kvt_proc_kill(p);
			rv = KVI_ETIMEDOUT;
		}
	}
	if (status != NULL) {
		*status = p->status;
	}
	return rv;
}

void
kvt_proc_free(kvt_proc *p)
{
	if (p == NULL) {
		return;
	}
	kvt_proc_kill(p);
	kvi_free(p);
}

/* pid_status_kib reads one "Field: N kB" line of /proc/pid/status. */
static long
pid_status_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *fp = fopen(path, "r");
	long kib = -1;
	size_t n = strlen(field);
	while (fp != NULL && fgets(line, sizeof(line), fp) != NULL) {
		if (strncmp(line, field, n) == 0 && line[n] == ':' &&
		    sscanf(line + n + 1, "%ld kB", &kib) == 1) {
			break;
		}
	}
	if (fp != NULL) {
		fclose(fp);
	}
	return kib;
}

long
kvt_pid_rss_kib(pid_t pid)
{
	return pid_status_kib(pid, "VmRSS");
}

long
kvt_pid_anon_kib(pid_t pid)
{
	return pid_status_kib(pid, "RssAnon");
}

long
kvt_pid_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (d == NULL) {
		return -1;
	}
	long n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		n += e->d_name[0] != '.';
	}
	closedir(d);
	return n;
}

long
kvt_file_size(const char *path)
{
	FILE *fp = fopen(path, "r");
	if (fp == NULL) {
		return 0;
	}
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	fclose(fp);
	return n < 0 ? 0 : n;
}

/* kvt_line_field finds key=VALUE in a log line of event; true when found,
 * VALUE copied into out. */
static bool
kvt_line_field(const char *line, const char *event, const char *key, char *out,
	       size_t len)
{
	char want[128];
	snprintf(want, sizeof(want), " event=%s ", event);
	if (strstr(line, want) == NULL) {
		return false;
	}
	snprintf(want, sizeof(want), " %s=", key);
	const char *v = strstr(line, want);
	if (v == NULL) {
		return false;
	}
	v += strlen(want);
	size_t n = strcspn(v, " \n");
	snprintf(out, len, "%.*s", (int)n, v);
	return true;
}

kvi_err
kvt_log_field(const char *path, long from, const char *event, const char *key,
	      char *out, size_t len, kvt_proc *p, int timeout_ms)
{
	int64_t deadline = kvt_now_ms() + timeout_ms;
	for (;;) {
		FILE *fp = fopen(path, "r");
		if (fp != NULL) {
			char line[2048];
			bool found = false;
			fseek(fp, from, SEEK_SET);
			while (!found &&
			       fgets(line, sizeof(line), fp) != NULL) {
				found =
				    kvt_line_field(line, event, key, out, len);
			}
			fclose(fp);
			if (found) {
				return KVI_OK;
			}
		}
		if (p != NULL && !kvt_proc_alive(p)) {
			return KVI_ECLOSED;
		}
		if (kvt_now_ms() >= deadline) {
			return KVI_ETIMEDOUT;
		}
		kvt_sleep_ms(20);
	}
}

kvi_err
kvt_log_port(const char *path, long from, const char *event, const char *key,
	     kvt_proc *p, int timeout_ms, int *port)
{
	char v[16];
	kvi_err rv =
	    kvt_log_field(path, from, event, key, v, sizeof(v), p, timeout_ms);
	if (rv != KVI_OK) {
		return rv;
	}
	char *end;
	long n = strtol(v, &end, 10);
	if (end == v || *end != '\0' || n <= 0 || n > 65535) {
		return KVI_EPROTO;
	}
	*port = (int)n;
	return KVI_OK;
}
