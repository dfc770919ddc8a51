#include "sp.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

bool
kvi_sp_url_split(const char *url, kvi_sp_url *out)
{
	memset(out, 0, sizeof(*out));
	if (strncmp(url, "ipc://", 6) == 0) {
		size_t n = strlen(url + 6);
		if (n == 0 || n >= sizeof(out->path)) {
			return false;
		}
		out->ipc = true;
		memcpy(out->path, url + 6, n + 1);
		return true;
	}
	static const struct {
		const char *scheme;
		int family;
	} tcp[] = {
	    {"tcp://", AF_UNSPEC}, {"tcp4://", AF_INET}, {"tcp6://", AF_INET6}};
	const char *hp = NULL;
	for (size_t i = 0; i < sizeof(tcp) / sizeof(tcp[0]) && hp == NULL;
	     i++) {
		size_t n = strlen(tcp[i].scheme);
		if (strncmp(url, tcp[i].scheme, n) == 0) {
			hp = url + n;
			out->family = tcp[i].family;
		}
	}
	const char *colon = hp != NULL ? strrchr(hp, ':') : NULL;
	if (colon == NULL) {
		return false;
	}
	const char *port = colon + 1;
	size_t pn = strlen(port);
	if (pn == 0 || pn >= sizeof(out->port) ||
	    strspn(port, "0123456789") != pn || atol(port) > 65535) {
		return false;
	}
	size_t hn = (size_t)(colon - hp);
	if (hn >= 2 && hp[0] == '[' && hp[hn - 1] == ']') {
		hp++;
		hn -= 2;
	}
	if (hn >= sizeof(out->host)) {
		return false;
	}
	memcpy(out->host, hp, hn);
	memcpy(out->port, port, pn + 1);
	return true;
}

int
kvi_sp_url_addr(const kvi_sp_url *u, int flags, struct sockaddr_storage *ss,
		socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (u->ipc) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;
		un->sun_family = AF_UNIX;
		snprintf(un->sun_path, sizeof(un->sun_path), "%s", u->path);
		*len = (socklen_t)sizeof(*un);
		return 0;
	}
	bool any = (flags & AI_PASSIVE) &&
		   (u->host[0] == '\0' || strcmp(u->host, "*") == 0);
	struct addrinfo hints = {
	    .ai_family = any && u->family == AF_UNSPEC ? AF_INET : u->family,
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = flags | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int gai = getaddrinfo(any ? NULL : u->host, u->port, &hints, &ai);
	if (gai != 0) {
		return gai;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}
