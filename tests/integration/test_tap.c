/*
 * test_tap.c - kvindex-tap from the outside: the decoder behind it on the
 * engines' own vectors (--hex), and a live simulated rank with a seq gap
 * closed from the replay socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvitest.h"

static char *dir;

static int
setup(void **state)
{
	(void)state;
	assert_int_equal(kvt_tmpdir_make("kvi-tap", &dir), KVI_OK);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	if (getenv("KVI_TEST_KEEP") == NULL) {
		kvt_tmpdir_remove(dir);
	}
	free(dir);
	return 0;
}

/* run_shell runs cmd with /bin/sh and waits for it. */
static int
run_shell(const char *cmd, int timeout_ms)
{
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	kvt_proc *p;
	char *log = kvt_path(dir, "sh.log");
	assert_int_equal(kvt_proc_start(argv, log, &p), KVI_OK);
	int status = -1;
	assert_int_equal(kvt_proc_wait(p, timeout_ms, &status), KVI_OK);
	kvt_proc_free(p);
	free(log);
	return status;
}

/* read_lines parses every line of path as JSON into an array. */
static json_t *
read_lines(const char *path)
{
	size_t len;
	char *text = kvt_file_read(path, &len);
	assert_non_null(text);
	json_t *all = json_array();
	for (char *line = strtok(text, "\n"); line != NULL;
	     line = strtok(NULL, "\n")) {
		json_t *v = json_loads(line, 0, NULL);
		if (v == NULL) {
			fail_msg("not JSON: %s", line);
		}
		json_array_append_new(all, v);
	}
	free(text);
	return all;
}

static void
test_hex_vectors(void **state)
{
	(void)state;
	json_t *vectors = json_array();
	char path[512];
	snprintf(path, sizeof(path), "%s/vectors/vllm_events.jsonl",
		 KVI_DATA_DIR);
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	char *hexes = kvt_path(dir, "in.hex");
	FILE *hex = fopen(hexes, "w");
	char line[16384];
	while (fgets(line, sizeof(line), in) != NULL) {
		json_t *v = json_loads(line, 0, NULL);
		assert_non_null(v);
		fprintf(hex, "%s\n",
			json_string_value(json_object_get(v, "hex")));
		json_array_append_new(vectors, v);
	}
	fclose(in);
	fclose(hex);
	char *out = kvt_path(dir, "out.jsonl");
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "'%s' --hex < '%s' > '%s'", KVI_TAP_BIN,
		 hexes, out);
	/* exit status 1: the vector that must be rejected was */
	assert_int_equal(run_shell(cmd, 20000), 1);
	json_t *got = read_lines(out);
	assert_int_equal(json_array_size(got), json_array_size(vectors));
	size_t i;
	json_t *v;
	json_array_foreach(vectors, i, v)
	{
		const json_t *expect = json_object_get(v, "expect");
		const json_t *g = json_array_get(got, i);
		assert_int_equal(json_integer_value(json_object_get(g, "line")),
				 (json_int_t)i + 1);
		const json_t *err = json_object_get(expect, "error");
		if (err != NULL) {
			assert_string_equal(
			    json_string_value(json_object_get(g, "error")),
			    json_string_value(err));
			continue;
		}
		assert_null(json_object_get(g, "error"));
		assert_true(json_equal(json_object_get(g, "dp_rank"),
				       json_object_get(expect, "dp_rank")));
		const json_t *we = json_object_get(expect, "events");
		const json_t *ge = json_object_get(g, "events");
		assert_int_equal(json_array_size(ge), json_array_size(we));
		for (size_t e = 0; e < json_array_size(we); e++) {
			const json_t *a = json_array_get(we, e);
			const json_t *b = json_array_get(ge, e);
			assert_true(json_equal(json_object_get(a, "type"),
					       json_object_get(b, "type")));
			const json_t *h = json_object_get(a, "block_hashes");
			if (h != NULL) {
				assert_true(json_equal(
				    h, json_object_get(b, "block_hashes")));
			}
			const json_t *t = json_object_get(a, "token_ids");
			if (t != NULL) {
				assert_true(json_equal(
				    t, json_object_get(b, "token_ids")));
			}
		}
	}
	json_decref(got);
	json_decref(vectors);
	free(out);
	free(hexes);
}

/* A BlockStored whose token id does not fit in u32: the decoder skips
 * the event, and the tap says so - a skipped event, its reason, and exit
 * status 1 - rather than print it as something else. */
static void
test_hex_skipped_event(void **state)
{
	(void)state;
	char *hexes = kvt_path(dir, "skip.hex");
	FILE *hex = fopen(hexes, "w");
	assert_non_null(hex);
	/* [1.0, [["BlockStored", [1], nil, [2^32], 1, nil, "GPU"]], 0] */
	fprintf(hex, "93cb3ff00000000000009197ab426c6f636b53746f7265649101c091"
		     "cf000000010000000001c0a347505500\n");
	fclose(hex);
	char *out = kvt_path(dir, "skip.jsonl");
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "'%s' --hex < '%s' > '%s'", KVI_TAP_BIN,
		 hexes, out);
	assert_int_equal(run_shell(cmd, 20000), 1);
	json_t *got = read_lines(out);
	assert_int_equal(json_array_size(got), 1);
	const json_t *g = json_array_get(got, 0);
	assert_null(json_object_get(g, "error"));
	assert_int_equal(json_integer_value(json_object_get(g, "skipped")), 1);
	const char *why = json_string_value(json_object_get(g, "skip_error"));
	assert_non_null(why);
	assert_true(strlen(why) > 0);
	const json_t *ev = json_array_get(json_object_get(g, "events"), 0);
	assert_string_equal(json_string_value(json_object_get(ev, "type")),
			    "skipped");
	assert_string_equal(json_string_value(json_object_get(ev, "reason")),
			    "malformed");
	assert_null(json_object_get(ev, "block_hashes"));
	json_decref(got);
	free(out);
	free(hexes);
}

static void
sim_post(kvt_sim *sim, const char *path, const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(sim, "POST", path, j, &r), KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(j);
}

static void
test_live_rank_with_gap(void **state)
{
	(void)state;
	kvt_sim sim;
	const char *flags[] = {"--pods", "1", "--dp", "2", "--paused", NULL};
	assert_int_equal(kvt_sim_start(KVI_SIM_BIN, flags, 10000, &sim),
			 KVI_OK);
	char ep[64], rep[64];
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", sim.zmq_port[1]);
	snprintf(rep, sizeof(rep), "tcp://127.0.0.1:%d", sim.replay_port[1]);
	char *out = kvt_path(dir, "live.jsonl");
	const char *argv[] = {KVI_TAP_BIN, "--endpoint", ep,  "--replay",
			      rep,         "--count",    "8", "--idle-exit-ms",
			      "8000",      NULL};
	kvt_proc *tap;
	assert_int_equal(kvt_proc_start(argv, out, &tap), KVI_OK);
	kvt_sleep_ms(500); /* the SUB connects before anything is sent */
	for (int i = 0; i < 8; i++) {
		if (i == 3) {
			/* batches 3..5 are not sent live: the tap sees a
			 * gap at seq 6 */
			sim_post(&sim, "/fault/skip",
				 "{\"pod\":0,\"rank\":1,\"count\":3}");
		}
		char body[256];
		int n = snprintf(body, sizeof(body),
				 "{\"pod\":0,\"rank\":1,\"token_ids\":[");
		for (int k = 0; k < 17; k++) {
			n += snprintf(body + n, sizeof(body) - (size_t)n,
				      "%s%d", k ? "," : "", 100 * i + k);
		}
		snprintf(body + n, sizeof(body) - (size_t)n, "]}");
		sim_post(&sim, "/prefill", body);
	}
	int status;
	assert_int_equal(kvt_proc_wait(tap, 15000, &status), KVI_OK);
	assert_int_equal(status, 0);
	kvt_proc_free(tap);
	kvt_sim_stop(&sim, NULL);

	json_t *lines = read_lines(out);
	int64_t next = 0;
	int gaps = 0, replayed = 0;
	size_t i;
	json_t *l;
	json_array_foreach(lines, i, l)
	{
		const json_t *gap = json_object_get(l, "gap");
		if (gap != NULL) {
			gaps++;
			assert_int_equal(json_integer_value(
					     json_object_get(gap, "expected")),
					 3);
			assert_int_equal(
			    json_integer_value(json_object_get(gap, "got")), 6);
			continue;
		}
		assert_int_equal(json_integer_value(json_object_get(l, "seq")),
				 next++);
		assert_int_equal(
		    json_integer_value(json_object_get(l, "dp_rank")), 1);
		const char *src =
		    json_string_value(json_object_get(l, "source"));
		replayed += strcmp(src, "replay") == 0;
		const json_t *ev =
		    json_array_get(json_object_get(l, "events"), 0);
		assert_non_null(ev);
	}
	/* seq 0..7 in order; the missing three (at least) came from the
	 * replay socket, which also sends what followed them */
	assert_int_equal(next, 8);
	assert_int_equal(gaps, 1);
	assert_true(replayed >= 3);
	json_decref(lines);
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hex_vectors),
	    cmocka_unit_test(test_hex_skipped_event),
	    cmocka_unit_test(test_live_rank_with_gap),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
