/*
 * replica.h - what the coordinator's flags say about running as one of
 * several replicas: its identity, where followers send writes, and the
 * lease it elects a leader with (lease.h). main.c's flags land here.
 */
#ifndef KVI_COORDINATOR_REPLICA_H
#define KVI_COORDINATOR_REPLICA_H

#include <stddef.h>

#include "error.h"
#include "kube_config.h"
#include "lease.h"
#include "metrics.h"

typedef struct kvc_replica_flags {
	const char *lease;     /* --leader-election-lease NAMESPACE/NAME */
	const char *identity;  /* --identity; NULL: the host name */
	const char *advertise; /* --advertise-url; NULL: derived */
	const char *http;      /* --http HOST:PORT */
	kvc_lease_config le;   /* the three durations */
} kvc_replica_flags;

/* kvc_replica_identity writes this replica's name: f's identity, else
 * the host name. */
void kvc_replica_identity(const char *given, char *out, size_t len);

/* kvc_replica_url writes where followers redirect writes: --advertise-url,
 * else http://$POD_IP:PORT, else the --http host (when not a wildcard) or
 * the identity; "" while the port (0 for an ephemeral one) is not known. */
void kvc_replica_url(const kvc_replica_flags *f, int port, const char *identity,
		     char *url, size_t ulen);

/* kvc_replica_open checks the lease name and starts the election with
 * kube's API server and credentials (resolved already:
 * kvc_kube_api_resolve); identity and url receive what it used. Prints
 * what is wrong to standard error and returns KVI_EINVAL otherwise. */
kvi_err kvc_replica_open(const kvc_replica_flags *f,
			 const kvc_kube_config *kube, kvi_metrics *metrics,
			 kvc_lease **out, char *identity, size_t ilen,
			 char *url, size_t ulen);

#endif /* KVI_COORDINATOR_REPLICA_H */
