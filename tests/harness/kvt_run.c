#include "kvt_run.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alloc.h"
#include "kvt_env.h"

extern char **environ;

/* run_env returns the environment of the program (the array kvi_free,
 * not its strings). */
static char **
run_env(const char *drop, const char *const *env)
{
	size_t n = 0, m = 0, k = 0;
	while (environ[n] != NULL) {
		n++;
	}
	while (env != NULL && env[m] != NULL) {
		m++;
	}
	char **out = kvi_calloc(n + m + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		if (drop == NULL ||
		    strncmp(environ[i], drop, strlen(drop)) != 0) {
			out[k++] = environ[i];
		}
	}
	for (size_t i = 0; i < m; i++) {
		out[k++] = (char *)env[i];
	}
	return out;
}

static bool
run_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		return false;
	}
	fputs(text, f);
	return fclose(f) == 0;
}

/* run_wait waits for pid up to timeout_ms, then kills it. */
static kvi_err
run_wait(pid_t pid, int timeout_ms, int *st)
{
	int64_t deadline = kvt_now_ms() + timeout_ms;
	while (waitpid(pid, st, WNOHANG) == 0) {
		if (kvt_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, st, 0);
			return KVI_ETIMEDOUT;
		}
		kvt_sleep_ms(5);
	}
	return KVI_OK;
}

kvi_err
kvt_run_exec(const char *const *argv, const char *in, const char *drop,
	     const char *const *env, const char *dir, int timeout_ms,
	     kvt_run *r)
{
	char *pin = kvt_path(dir, "run.in"), *pout = kvt_path(dir, "run.out"),
	     *perr = kvt_path(dir, "run.err");
	kvi_err rv = run_write(pin, in != NULL ? in : "") ? KVI_OK : KVI_EIO;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, pin, O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, pout,
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, perr,
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char **envp = run_env(drop, env);
	pid_t pid;
	int st = 0;
	if (rv == KVI_OK && posix_spawn(&pid, argv[0], &fa, NULL,
					(char *const *)argv, envp) != 0) {
		rv = KVI_EIO;
	}
	posix_spawn_file_actions_destroy(&fa);
	kvi_free(envp);
	if (rv == KVI_OK) {
		rv = run_wait(pid, timeout_ms, &st);
	}
	if (rv == KVI_OK) {
		r->status =
		    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		r->out = kvt_file_read(pout, NULL);
		r->err = kvt_file_read(perr, NULL);
		if (r->out == NULL || r->err == NULL) {
			kvt_run_fini(r);
			rv = KVI_EIO;
		}
	}
	kvi_free(pin);
	kvi_free(pout);
	kvi_free(perr);
	return rv;
}

void
kvt_run_fini(kvt_run *r)
{
	kvi_free(r->out);
	kvi_free(r->err);
	r->out = r->err = NULL;
}
