/*
 * kube_check.h - cmocka checks for whole-cluster tests whose pods come
 * from Kubernetes: the engine simulator, two real shards, a real
 * coordinator watching a test API server (kvindex-kubeapi, which speaks
 * the list/watch protocol of docs/wire.md#kubernetes-pod-watch) with a bearer
 * token.
 *
 * Each watched pod stands for one simulated pod: its annotations carry
 * the simulator pod's ports (kvindex.io/zmq-port, replay-port,
 * recover-port), its labels app=engine and the model. The coordinator
 * watches namespaces "ml" and "ml2" with --watch-label app=engine,
 * --watch-dp-size 2 and a short NotReady grace (KC_GRACE_MS).
 *
 * State is checked through /workers (as a sorted signature string) and
 * /query (the tokens a listener matched). Single-threaded.
 */
#ifndef KVI_TESTS_KUBE_CHECK_H
#define KVI_TESTS_KUBE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord_check.h"
#include "kvt_kubeapi.h"

#define KC_GRACE_MS 2000
#define KC_WAIT_MS  30000
#define KC_NS       "ml"
#define KC_NS2      "ml2" /* watched too, empty unless a test puts pods */

typedef struct kcluster {
	cluster c;
	kvt_kube api;
	bool api_started;
	char *dir;         /* the token file's directory */
	char *token_path;  /* what the coordinator reads */
	char api_url[128]; /* the coordinator's --kube-api */
} kcluster;

/* kc_start starts a simulator of pods DP=2 pods, the API server (state
 * kept across restarts, requiring api_token) and two shards; the
 * coordinator comes with kc_coord. */
void kc_start(kcluster *k, int pods, const char *api_token);

/* kc_coord writes file_token to the token file and starts the
 * coordinator watching the API server. */
void kc_coord(kcluster *k, const char *file_token);

/* kc_coord_at does the same with another API URL (a TLS front) and CA
 * file (NULL: none); both strings must outlive the cluster. */
void kc_coord_at(kcluster *k, const char *api, const char *ca_file,
		 const char *file_token);

/* kc_token_file rewrites the coordinator's token file. */
void kc_token_file(kcluster *k, const char *token);

void kc_cleanup(kcluster *k);

/* kc_put stores pod name in namespace ml, standing for pod p of sim
 * (ports as annotations), with the given IP and readiness; dp_size > 0
 * adds the kvindex.io/dp-size annotation; app is its app label. */
void kc_put(kcluster *k, const char *name, const kvt_sim *sim, int p,
	    const char *ip, bool ready, int dp_size, const char *app);

/* kc_put_json stores a pod object as it is. */
void kc_put_json(kcluster *k, const char *name, json_t *pod);

/* kc_delete deletes pod name from namespace ml. */
void kc_delete(kcluster *k, const char *name);

/* kc_expect appends "ml/name#r=tcp://ip:port+r" for ranks 0..ranks-1 to
 * buf, in the form kc_workers_sig uses. */
void kc_expect(char *buf, size_t len, const char *name, int ranks,
	       const char *ip, int port);

/* kc_workers_sig returns /workers as "pod#rank=endpoint,..." sorted,
 * listing only listeners of pods whose source is kubernetes and which
 * are active (kvi_free). */
char *kc_workers_sig(kcluster *k);

/* kc_wait_workers waits until kc_workers_sig equals the signature of
 * expect (any order of its entries); fails with the last one. */
void kc_wait_workers(kcluster *k, const char *expect, int timeout_ms);

/* kc_tokens fills t with n tokens derived from seed. */
void kc_tokens(uint32_t *t, size_t n, uint32_t seed);

/* kc_prefill runs tokens on (pod p, rank r) of sim. */
void kc_prefill(const kvt_sim *sim, int p, int r, const uint32_t *t, size_t n);

/* kc_matched returns the tokens /query says listener (name, rank)
 * matched for t (0: not in the answer; an unknown model counts as no
 * match). */
int kc_matched(kcluster *k, const uint32_t *t, size_t n, const char *name,
	       int rank);

/* kc_wait_matched waits until kc_matched returns want. */
void kc_wait_matched(kcluster *k, const uint32_t *t, size_t n, const char *name,
		     int rank, int want);

#endif /* KVI_TESTS_KUBE_CHECK_H */
