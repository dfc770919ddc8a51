/*
 * test_coord_kube_tls.c - the pod watcher over HTTPS, as it talks to a
 * real API server: the test API server behind a TLS front (socat, with a
 * certificate for 127.0.0.1 signed by a CA made for the test).
 *
 *  - with --kube-ca-file naming that CA, pods are listed and watched and
 *    their ranks registered;
 *  - with another CA, the certificate is refused: nothing is registered,
 *    /ready stays 503 and the log says why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "kube_check.h"

/* run runs a shell command line in dir; fails the test unless it exits 0. */
static void
run(const char *dir, const char *cmd)
{
	char line[2048];
	snprintf(line, sizeof(line), "cd '%s' && (%s) >>tls.log 2>&1", dir,
		 cmd);
	if (system(line) != 0) {
		fail_msg("failed: %s (see %s/tls.log)", cmd, dir);
	}
}

/* make_certs writes ca.pem (the test CA), other.pem (an unrelated CA) and
 * srv.pem (key and certificate for IP 127.0.0.1, signed by ca.pem). */
static void
make_certs(const char *dir)
{
	run(dir,
	    KVI_OPENSSL_BIN " req -x509 -newkey rsa:2048 -nodes -days 2 "
			    "-keyout ca.key -out ca.pem -subj /CN=kvindex-ca");
	run(dir, KVI_OPENSSL_BIN " req -x509 -newkey rsa:2048 -nodes -days 2 "
				 "-keyout other.key -out other.pem "
				 "-subj /CN=kvindex-other");
	run(dir, KVI_OPENSSL_BIN " req -newkey rsa:2048 -nodes -keyout srv.key "
				 "-out srv.csr -subj /CN=127.0.0.1");
	run(dir, "printf 'subjectAltName=IP:127.0.0.1\\n' >ext.cnf");
	run(dir, KVI_OPENSSL_BIN " x509 -req -in srv.csr -CA ca.pem -CAkey "
				 "ca.key -CAcreateserial -days 2 -out srv.crt "
				 "-extfile ext.cnf");
	run(dir, "cat srv.crt srv.key >srv.pem");
}

/* socat_port waits for socat's log at path to say where it listens
 * ("listening on AF=2 127.0.0.1:PORT", with -d -d) and returns the port,
 * 0 if it does not within 10 s. */
static int
socat_port(const char *path, kvt_proc *proc)
{
	const char *said = "listening on AF=2 127.0.0.1:";
	int64_t deadline = kvt_now_ms() + 10000;
	while (kvt_now_ms() < deadline && kvt_proc_alive(proc)) {
		char *text = kvt_file_read(path, NULL);
		const char *at = text != NULL ? strstr(text, said) : NULL;
		int port = at != NULL ? atoi(at + strlen(said)) : 0;
		kvi_free(text);
		if (port > 0) {
			return port;
		}
		kvt_sleep_ms(50);
	}
	return 0;
}

/* tls_front starts socat terminating TLS in front of the API server, on
 * a port of the kernel's choice; returns the https URL's port. */
static int
tls_front(kcluster *k, const char *dir, kvt_proc **proc)
{
	char listen[512], target[128];
	snprintf(listen, sizeof(listen),
		 "OPENSSL-LISTEN:0,bind=127.0.0.1,reuseaddr,fork,"
		 "cert=%s/srv.pem,verify=0",
		 dir);
	snprintf(target, sizeof(target), "TCP:%s:%d", k->api.host, k->api.port);
	const char *argv[] = {KVI_SOCAT_BIN, "-d", "-d", listen, target, NULL};
	char *log = kvt_path(dir, "socat.log");
	assert_int_equal(kvt_proc_start(argv, log, proc), KVI_OK);
	/* it logs the port once it listens */
	int port = socat_port(log, *proc);
	if (port == 0) {
		kvt_log_tail("socat", log, 4095);
		fail_msg("socat did not say where it listens");
	}
	kvi_free(log);
	return port;
}

static void
test_kube_https(void **state)
{
	(void)state;
	kcluster kk, *k = &kk;
	kc_start(k, 1, "tls-token");
	kc_put(k, "engine-0", &k->c.sim, 0, "127.0.0.1", true, 0, "engine");
	make_certs(k->dir);
	kvt_proc *front = NULL;
	int port = tls_front(k, k->dir, &front);
	char url[64];
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);

	/* an unrelated CA: refused, clearly */
	char *other = kvt_path(k->dir, "other.pem");
	kc_coord_at(k, url, other, "tls-token");
	int64_t deadline = kvt_now_ms() + KC_WAIT_MS;
	while (clu_metric(&k->c, "kvindex_coord_kube_errors_total") < 2) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	long st;
	json_t *r = clu_get(&k->c, "/ready", &st);
	json_decref(r);
	assert_int_equal(st, 503);
	kc_wait_workers(k, "", 100);
	size_t len;
	char *text = kvt_file_read(k->c.log_path, &len);
	assert_non_null(text);
	assert_non_null(strstr(text, "cannot connect to the API server"));
	assert_non_null(strstr(text, "certificate"));
	kvi_free(text);
	clu_cleanup(&k->c);

	/* the right CA: listed, watched, registered */
	memset(&k->c, 0, sizeof(k->c));
	const char *sim[] = {"--pods", "1", "--dp", "2", NULL};
	clu_sim(&k->c, sim);
	clu_shards(&k->c, 2);
	kc_put(k, "engine-0", &k->c.sim, 0, "127.0.0.1", true, 0, "engine");
	char *ca = kvt_path(k->dir, "ca.pem");
	kc_coord_at(k, url, ca, "tls-token");
	char want[1024] = "";
	kc_expect(want, sizeof(want), "engine-0", 2, "127.0.0.1",
		  k->c.sim.zmq_port[0]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	/* and watched: a change arrives through the TLS stream */
	kc_put(k, "engine-0", &k->c.sim, 0, "127.0.0.1", true, 1, "engine");
	want[0] = '\0';
	kc_expect(want, sizeof(want), "engine-0", 1, "127.0.0.1",
		  k->c.sim.zmq_port[0]);
	kc_wait_workers(k, want, KC_WAIT_MS);
	r = clu_get(&k->c, "/ready", &st);
	json_decref(r);
	assert_int_equal(st, 200);

	kc_cleanup(k);
	kvt_proc_stop(front, 5000, NULL);
	kvt_proc_free(front);
	kvi_free(ca);
	kvi_free(other);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kube_https),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
