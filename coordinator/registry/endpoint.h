/*
 * endpoint.h - which engine socket a listener's endpoint reaches, so that
 * two registrations of one socket are told from two sockets.
 *
 * One PUB socket is one listener: a second listener on it would index the
 * same events under another name, and /query would list the engine's
 * blocks twice, one of them on an instance no request can be sent to.
 * Endpoints are therefore compared by what they reach, not by how they
 * are spelled. An endpoint's ids are the addresses its host stands for,
 * each with its port:
 *
 *  - an IPv4 or IPv6 literal in any form getaddrinfo() takes ("127.1",
 *    "0x7f.0.0.1", "[0:0::1]") is written canonically ("127.0.0.1",
 *    "[::1]"); an IPv4-mapped IPv6 address is its IPv4 address, and the
 *    unspecified address, which a connect() on Linux takes for the host's
 *    own, is the loopback address (0.0.0.0 is 127.0.0.1, [::] is [::1]);
 *  - a name is resolved, and stands for each of its addresses: localhost
 *    is 127.0.0.1. A name that does not resolve within the wait stays a
 *    name (lower case, no trailing dot), equal only to itself;
 *  - an ipc:// endpoint is its path; what is not tcp://host:port or
 *    ipc://path is its own text.
 *
 * An id is text: "10.0.0.5:5557", "[::1]:5557", "ipc:///run/e.sock".
 * Two endpoints reach the same socket when they share an id.
 *
 * Resolving a name waits at most timeout_ms (getaddrinfo_a), so that a
 * DNS server that does not answer holds the caller (the assigner thread)
 * no longer than that; a lookup that outlives the wait finishes on its
 * own and frees itself. A literal is never looked up.
 *
 * Threading: any thread; nothing is shared. Every string returned is the
 * caller's (kvc_ep_strv_free).
 */
#ifndef KVI_COORDINATOR_ENDPOINT_H
#define KVI_COORDINATOR_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

/* How long a name may take to resolve. */
#define KVC_EP_RESOLVE_MS 1000

/* kvc_ep_addrs returns the canonical addresses host stands for (IPv6 in
 * brackets), distinct and sorted, and their number in *n (at least 1: a
 * name that does not resolve is itself). host may be in brackets. */
char **kvc_ep_addrs(const char *host, int timeout_ms, size_t *n);

/* kvc_ep_id returns the id of port on addr (one of kvc_ep_addrs). */
char *kvc_ep_id(const char *addr, uint32_t port);

/* kvc_ep_url_ids returns the ids of a listener's endpoint url
 * ("tcp://host:port", "tcp://source;host:port", "ipc://path"), and their
 * number in *n (at least 1). */
char **kvc_ep_url_ids(const char *url, int timeout_ms, size_t *n);

/* kvc_ep_strv_free frees n strings and their array; NULL is allowed. */
void kvc_ep_strv_free(char **v, size_t n);

#endif /* KVI_COORDINATOR_ENDPOINT_H */
