#include "replica.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* kvc_replica_identity is this replica's name: --identity, else the host
 * name. */
void
kvc_replica_identity(const char *given, char *out, size_t len)
{
	if (given != NULL) {
		snprintf(out, len, "%s", given);
	} else if (gethostname(out, len) != 0 || out[0] == '\0') {
		snprintf(out, len, "kvindex-coordinator");
	}
	out[len - 1] = '\0';
}

/* port_of returns the port of a HOST:PORT address (0 when none). */
static int
port_of(const char *hostport)
{
	const char *colon = strrchr(hostport, ':');
	return colon != NULL ? atoi(colon + 1) : 0;
}

/* wildcard says whether an --http host binds every address, which no
 * follower can be sent to. */
static bool
wildcard(const char *host)
{
	static const char *const any[] = {"", "0.0.0.0", "*", "::", "[::]"};
	for (size_t i = 0; i < sizeof(any) / sizeof(*any); i++) {
		if (strcmp(host, any[i]) == 0) {
			return true;
		}
	}
	return false;
}

/* kvc_replica_url is where followers redirect writes:
 * --advertise-url, else http://$POD_IP:PORT, else the --http host (when
 * not a wildcard) or the identity; "" while the port is not known. */
void
kvc_replica_url(const kvc_replica_flags *o, int port, const char *identity,
		char *url, size_t ulen)
{
	const char *pod_ip = getenv("POD_IP");
	char host[256];
	snprintf(host, sizeof(host), "%s", o->http);
	char *colon = strrchr(host, ':');
	if (colon != NULL) {
		*colon = '\0';
	}
	if (o->advertise != NULL) {
		snprintf(url, ulen, "%s", o->advertise);
	} else if (port == 0) {
		url[0] = '\0';
	} else if (pod_ip != NULL && pod_ip[0] != '\0') {
		snprintf(url, ulen, "http://%s:%d", pod_ip, port);
	} else if (!wildcard(host)) {
		snprintf(url, ulen, "http://%s:%d", host, port);
	} else {
		snprintf(url, ulen, "http://%s:%d", identity, port);
	}
}

/* kvc_replica_open starts leader election (--leader-election-lease). */
kvi_err
kvc_replica_open(const kvc_replica_flags *o, const kvc_kube_config *kube,
		 kvi_metrics *metrics, kvc_lease **out, char *identity,
		 size_t ilen, char *url, size_t ulen)
{
	char err[512];
	char ns[254], name[254]; /* the lease keeps copies */
	const char *slash = strchr(o->lease, '/');
	if (slash == NULL || slash == o->lease || slash[1] == '\0' ||
	    (size_t)(slash - o->lease) >= sizeof(ns) ||
	    strlen(slash + 1) >= sizeof(name)) {
		fprintf(stderr,
			"kvindex-coordinator: --leader-election-lease: "
			"%s is not NAMESPACE/NAME\n",
			o->lease);
		return KVI_EINVAL;
	}
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - o->lease), o->lease);
	snprintf(name, sizeof(name), "%s", slash + 1);
	kvc_replica_identity(o->identity, identity, ilen);
	kvc_replica_url(o, port_of(o->http), identity, url, ulen);
	kvc_lease_config c = o->le;
	c.api = kube->api;
	c.token_file = kube->token_file;
	c.ca_file = kube->ca_file;
	c.ns = ns;
	c.name = name;
	c.identity = identity;
	c.url = url[0] != '\0' ? url : NULL;
	if (kvc_lease_open(&c, metrics, out, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "kvindex-coordinator: leader election: %s\n",
			err);
		return KVI_EINVAL;
	}
	KVI_INFO("leader_election", "lease=%s identity=%s url=%s", o->lease,
		 identity, url);
	return KVI_OK;
}
