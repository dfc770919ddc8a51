/*
 * sp.h - the framing of nng's request/reply sockets on the wire (the SP
 * protocols over tcp:// and ipc://) and the URLs they take, for the parts
 * of kvindex that speak it from a libevent loop instead of through nng's
 * threads: the coordinator's query links (coordinator/query/qlink.c) and the
 * shard's request server (shard/rpc/service_net.c, service_listen.c). Both
 * ends stay compatible with nng's own req0 and rep0 sockets, which the
 * control path and the tools still use. The framing is inline here; the
 * URLs are parsed in sp.c.
 *
 * A connection starts with 8 bytes from each side, sent at the same time:
 * 0x00 'S' 'P' 0x00, the sender's protocol number (16 bits, big-endian:
 * req0 0x30, rep0 0x31) and two zero bytes. Then each message is its
 * length, 64 bits big-endian (over ipc:// after a type byte 0x01), and that
 * many bytes: the header, then the body. A request's header is its
 * backtrace, 32-bit big-endian words of which the last (and, between a
 * client and a server, the only one) is the request id with its top bit
 * set; the reply carries the same header back.
 */
#ifndef KVI_COMMON_SP_H
#define KVI_COMMON_SP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bytes.h"

#define KVI_SP_PROTO_REQ 0x30 /* nng's req0 */
#define KVI_SP_PROTO_REP 0x31 /* nng's rep0 */

/* The hello's length, and the longest frame prefix (ipc's type byte and
 * the length). */
#define KVI_SP_HELLO_LEN  8
#define KVI_SP_PREFIX_MAX 9

/* The most backtrace words a request may carry (nng's default TTL). */
#define KVI_SP_HOPS_MAX 8

/* kvi_sp_hello writes the 8 bytes a socket of protocol proto sends first. */
static inline void
kvi_sp_hello(uint8_t h[KVI_SP_HELLO_LEN], uint16_t proto)
{
	h[0] = 0;
	h[1] = 'S';
	h[2] = 'P';
	h[3] = 0;
	h[4] = (uint8_t)(proto >> 8);
	h[5] = (uint8_t)proto;
	h[6] = 0;
	h[7] = 0;
}

/* kvi_sp_hello_is says whether h is the hello of a socket of protocol
 * proto. */
static inline bool
kvi_sp_hello_is(const uint8_t h[KVI_SP_HELLO_LEN], uint16_t proto)
{
	return h[0] == 0 && h[1] == 'S' && h[2] == 'P' && h[3] == 0 &&
	       h[6] == 0 && h[7] == 0 && (uint16_t)(h[4] << 8 | h[5]) == proto;
}

/* kvi_sp_prefix_len is the length of a frame's prefix. */
static inline size_t
kvi_sp_prefix_len(bool ipc)
{
	return ipc ? 9 : 8;
}

/* kvi_sp_prefix writes the prefix of a frame of len bytes into p and
 * returns its length. */
static inline size_t
kvi_sp_prefix(uint8_t p[KVI_SP_PREFIX_MAX], bool ipc, uint64_t len)
{
	size_t n = 0;
	if (ipc) {
		p[n++] = 1;
	}
	kvi_put_be64(p + n, len);
	return n + 8;
}

/* kvi_sp_prefix_read reads the length from a frame's prefix p; false when
 * the prefix is malformed (ipc's type byte is not a message's). */
static inline bool
kvi_sp_prefix_read(const uint8_t *p, bool ipc, uint64_t *len)
{
	if (ipc && p[0] != 1) {
		return false;
	}
	*len = kvi_get_be64(p + (ipc ? 1 : 0));
	return true;
}

/* kvi_sp_backtrace_len returns the length of the backtrace at the start
 * of a request's n bytes: through the first word with its top bit set.
 * Returns 0 when there is none within KVI_SP_HOPS_MAX words. */
static inline size_t
kvi_sp_backtrace_len(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < KVI_SP_HOPS_MAX && 4 * (i + 1) <= n; i++) {
		if (p[4 * i] & 0x80) {
			return 4 * (i + 1);
		}
	}
	return 0;
}

/* An nng URL, split: "ipc:///path", or "tcp://host:port" (tcp4://,
 * tcp6:// for one family), the host an address, a name, "[v6]", or "*"
 * or nothing for every address of a listener. */
typedef struct kvi_sp_url {
	bool ipc;
	int family;     /* tcp: AF_UNSPEC, AF_INET or AF_INET6 */
	char path[108]; /* ipc: the socket's path */
	char host[256]; /* tcp: brackets removed */
	char port[8];   /* tcp: decimal, 0..65535 */
} kvi_sp_url;

/* kvi_sp_url_split splits url into *out; false for another scheme, an
 * empty path, a missing or malformed port, or a part too long. */
bool kvi_sp_url_split(const char *url, kvi_sp_url *out);

/* kvi_sp_url_addr writes u's address to ss and its length to *len: the
 * path of an ipc URL, else the first address getaddrinfo gives for its
 * host and port with flags (AI_PASSIVE: a listener's, where "*" and an
 * empty host are every IPv4 address; AI_NUMERICHOST: addresses only).
 * Returns 0, or getaddrinfo's error. */
int kvi_sp_url_addr(const kvi_sp_url *u, int flags, struct sockaddr_storage *ss,
		    socklen_t *len);

#endif /* KVI_COMMON_SP_H */
