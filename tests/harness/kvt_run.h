/*
 * kvt_run.h - a command-line program run to its end as a script runs it:
 * text on its standard input, its standard output and its standard error
 * captured apart, and its exit status; for the tests of a tool
 * (kvindexctl).
 *
 * The program gets the test's environment without the variables whose
 * names begin with a prefix (the tool's own, so that the test's
 * environment never leaks into what it checks), plus the entries the test
 * gives. Its input and output go through files of a directory of the
 * test's, overwritten by each run: one run at a time per directory.
 */
#ifndef KVI_TESTS_KVT_RUN_H
#define KVI_TESTS_KVT_RUN_H

#include "error.h"

typedef struct kvt_run {
	int status; /* the exit code, or 128 + the signal */
	char *out;  /* standard output, NUL-terminated (kvi_free) */
	char *err;  /* standard error, likewise */
} kvt_run;

/* kvt_run_exec runs argv (argv[0] a path; NULL-ended) with in (NULL:
 * nothing) on its standard input, its environment the test's without the
 * variables whose names begin with drop (NULL: none left out), plus env
 * ("NAME=value", NULL-ended; NULL: none), its files in dir, and waits for
 * it up to timeout_ms. *r is filled when it returns KVI_OK (kvt_run_fini).
 * Returns KVI_EIO when it could not be started or its files not be
 * written or read, KVI_ETIMEDOUT when it had to be killed. */
kvi_err kvt_run_exec(const char *const *argv, const char *in, const char *drop,
		     const char *const *env, const char *dir, int timeout_ms,
		     kvt_run *r);

void kvt_run_fini(kvt_run *r);

#endif /* KVI_TESTS_KVT_RUN_H */
