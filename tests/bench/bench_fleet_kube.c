/*
 * bench_fleet_kube.c - bench_fleet's pods in a test Kubernetes API server;
 * see bench_fleet_kube.h.
 */
#include "bench_fleet_kube.h"

#include <jansson.h>
#include <stdio.h>

bool
bfk_start(kvt_kube *k)
{
	kvi_err rv = kvt_kube_start(KVI_KUBEAPI_BIN, NULL, 30000, k);
	if (rv != KVI_OK) {
		fprintf(stderr,
			"bench_fleet: the API server did not start: "
			"%s (its log: %s)\n",
			kvi_strerror(rv), k->log_path);
		return false;
	}
	return true;
}

void
bfk_coord_args(const kvt_kube *k, const char **av, int *ac)
{
	av[(*ac)++] = "--kube-api";
	av[(*ac)++] = k->url;
	av[(*ac)++] = "--watch-namespace";
	av[(*ac)++] = "fleet";
	av[(*ac)++] = "--watch-label";
	av[(*ac)++] = "app=engine";
}

bool
bfk_put(const kvt_kube *k, int from, int to)
{
	for (int p = from; p < to; p++) {
		char ip[32], name[32], port[16];
		snprintf(ip, sizeof(ip), "127.0.0.%d", 2 + p % 200);
		snprintf(name, sizeof(name), "pod-%d", p);
		snprintf(port, sizeof(port), "%d", 20000 + (p / 200) * 2);
		const char *labels[] = {"app", "engine", NULL};
		const char *ann[] = {"kvindex.io/zmq-port",
				     port,
				     "kvindex.io/dp-size",
				     "2",
				     "kvindex.io/model",
				     "m",
				     "kvindex.io/block-size",
				     "16",
				     NULL};
		json_t *pod = kvt_kube_pod(ip, true, labels, ann);
		kvi_err rv = kvt_kube_put_pod(k, "fleet", name, pod, NULL);
		json_decref(pod);
		if (rv != KVI_OK) {
			fprintf(stderr, "bench_fleet: PUT pod %s: %s\n", name,
				kvi_strerror(rv));
			return false;
		}
	}
	return true;
}
