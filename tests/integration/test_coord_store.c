/*
 * test_coord_store.c - the coordinator's own store (--data-dir) when its
 * file is damaged: a data.mdb cut short, which used to kill the
 * coordinator by SIGBUS at every start, is moved aside with the reason in
 * the log and the coordinator starts without it; one cut to nothing
 * starts empty and says so. Either way registrations are taken again.
 */
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "register_check.h"

/* coord_stop stops the coordinator cleanly, expecting status 0. */
static void
coord_stop(cluster *c)
{
	int status = -1;
	assert_int_equal(kvt_proc_stop(c->coord, 10000, &status), KVI_OK);
	assert_int_equal(status, 0);
	kvt_proc_free(c->coord);
	c->coord = NULL;
}

/* store_cut cuts the coordinator's data.mdb to bytes and returns the size
 * it had. */
static long
store_cut(cluster *c, long bytes)
{
	char *path = kvt_path(c->data_dir, "data.mdb");
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, bytes), 0);
	free(path);
	return (long)st.st_size;
}

static size_t
quarantined_dirs(cluster *c)
{
	char pattern[512];
	snprintf(pattern, sizeof(pattern), "%s.corrupt-*", c->data_dir);
	glob_t g;
	size_t n = glob(pattern, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
	globfree(&g);
	return n;
}

/* log_since returns the coordinator's log past byte from (free()). */
static char *
log_since(cluster *c, long from)
{
	size_t len;
	char *log = kvt_file_read(c->log_path, &len);
	assert_non_null(log);
	assert_true((size_t)from <= len);
	memmove(log, log + from, len - (size_t)from + 1);
	return log;
}

/* register_pods registers the simulator's two pods; want is the status
 * expected (0: 200 or 201, for a pod the shards may have given back). */
static void
register_pods(cluster *c, long want)
{
	for (int p = 0; p < 2; p++) {
		char body[512], name[32];
		pod_name(p, name, sizeof(name));
		pod_body(c, body, sizeof(body), name, p, 16);
		long st;
		json_t *j = clu_post(c, "/register", body, &st);
		if (want != 0 ? st != want : st != 200 && st != 201) {
			fail_msg("/register %s: %ld %s", name, st, dump(j));
		}
		json_decref(j);
	}
}

static void
test_store_cut_short(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "2", "--dp", "1", NULL};
	clu_sim(c, sim);
	clu_shards(c, 1);
	clu_coord(c, false, NULL);
	register_pods(c, 201);
	clu_wait_active(c, 2, CLU_WAIT_MS);
	coord_stop(c);
	/* three pages: the meta pages and one more, far fewer than the
	 * store's tables use */
	long page = sysconf(_SC_PAGESIZE);
	assert_true(store_cut(c, 3 * page) > 3 * page);
	long from = kvt_file_size(c->log_path);
	clu_coord_relaunch(c);
	char *log = log_since(c, from);
	const char *q = strstr(log, "event=store_quarantined");
	assert_non_null(q);
	assert_non_null(strstr(q, "cut short"));
	char size[64];
	snprintf(size, sizeof(size), "data.mdb is %ld bytes", 3 * page);
	assert_non_null(strstr(q, size));
	free(log);
	assert_int_equal(quarantined_dirs(c), 1);
	/* it stores registrations again */
	register_pods(c, 0);
	clu_wait_active(c, 2, CLU_WAIT_MS);
	coord_stop(c);
	/* cut to nothing: starts empty, says so, moves nothing aside */
	store_cut(c, 0);
	from = kvt_file_size(c->log_path);
	clu_coord_relaunch(c);
	log = log_since(c, from);
	const char *empty = strstr(log, "event=store_empty");
	assert_non_null(empty);
	assert_non_null(strstr(empty, "0 bytes"));
	assert_null(strstr(log, "event=store_quarantined"));
	free(log);
	assert_int_equal(quarantined_dirs(c), 1);
	register_pods(c, 0);
	clu_wait_active(c, 2, CLU_WAIT_MS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_store_cut_short,
					    clu_test_setup, clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
