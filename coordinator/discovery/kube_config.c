#include "kube_config.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static bool
kube_ns_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-') {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-')) {
			return false;
		}
	}
	return true;
}

kvi_err
kvc_kube_config_resolve(kvc_kube_config *cfg, kvc_kube_bufs *bufs, char *err,
			size_t errlen)
{
	if (cfg->n_namespaces == 0) {
		snprintf(err, errlen, "no namespace to watch");
		return KVI_EINVAL;
	}
	for (size_t i = 0; i < cfg->n_namespaces; i++) {
		if (!kube_ns_valid(cfg->namespaces[i])) {
			snprintf(
			    err, errlen,
			    "namespace \"%.80s\" is not a valid name "
			    "(lower-case letters, digits, '-', at most 63)",
			    cfg->namespaces[i]);
			return KVI_EINVAL;
		}
	}
	const kvc_kube_defaults *d = &cfg->defaults;
	if (d->zmq_port < 1 || d->zmq_port > 65535 || d->dp_size < 1 ||
	    d->dp_size > KVC_DP_SIZE_MAX || d->block_size < 1) {
		snprintf(err, errlen, "watch defaults out of range");
		return KVI_EINVAL;
	}
	return kvc_kube_api_resolve(cfg, bufs, err, errlen);
}

kvi_err
kvc_kube_api_resolve(kvc_kube_config *cfg, kvc_kube_bufs *bufs, char *err,
		     size_t errlen)
{
	if (cfg->api == NULL) {
		const char *host = getenv("KUBERNETES_SERVICE_HOST");
		const char *port = getenv("KUBERNETES_SERVICE_PORT");
		if (host == NULL || host[0] == '\0') {
			snprintf(err, errlen,
				 "not running in a cluster "
				 "(KUBERNETES_SERVICE_HOST is unset): give "
				 "--kube-api");
			return KVI_EINVAL;
		}
		bool v6 = strchr(host, ':') != NULL;
		snprintf(bufs->api, sizeof(bufs->api), "https://%s%s%s:%s",
			 v6 ? "[" : "", host, v6 ? "]" : "",
			 port != NULL && port[0] != '\0' ? port : "443");
		cfg->api = bufs->api;
	}
	if (strncmp(cfg->api, "http://", 7) != 0 &&
	    strncmp(cfg->api, "https://", 8) != 0) {
		snprintf(err, errlen,
			 "--kube-api \"%.80s\" is not an http(s) URL",
			 cfg->api);
		return KVI_EINVAL;
	}
	if (cfg->token_file == NULL &&
	    access(KVC_KUBE_SA_DIR "/token", R_OK) == 0) {
		snprintf(bufs->token, sizeof(bufs->token), "%s",
			 KVC_KUBE_SA_DIR "/token");
		cfg->token_file = bufs->token;
	}
	if (cfg->ca_file == NULL && strncmp(cfg->api, "https://", 8) == 0 &&
	    access(KVC_KUBE_SA_DIR "/ca.crt", R_OK) == 0) {
		snprintf(bufs->ca, sizeof(bufs->ca), "%s",
			 KVC_KUBE_SA_DIR "/ca.crt");
		cfg->ca_file = bufs->ca;
	}
	return KVI_OK;
}

bool
kvc_kube_read_token(const char *path, char *out, size_t len, char *err,
		    size_t errlen)
{
	out[0] = '\0';
	if (path == NULL) {
		return true;
	}
	char why[600];
	if (kvi_secret_read(path, out, len, why, sizeof(why)) != KVI_OK) {
		snprintf(err, errlen, "the token file %s", why);
		return false;
	}
	return true;
}

static pthread_once_t kvc_curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void
kvc_kube_curl_init(void)
{
	pthread_once(&kvc_curl_once, curl_init_once);
}
