/*
 * test_endpoint - which socket a listener's endpoint reaches (endpoint.h):
 * the canonical text of IPv4 and IPv6 literals in their other forms, a
 * name resolved from /etc/hosts (localhost), and the ids of tcp:// and
 * ipc:// endpoints. No name here needs DNS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "endpoint.h"

/* one_addr checks that host stands for exactly want. */
static void
one_addr(const char *host, const char *want)
{
	size_t n;
	char **v = kvc_ep_addrs(host, KVC_EP_RESOLVE_MS, &n);
	if (n != 1 || strcmp(v[0], want) != 0) {
		fail_msg("%s: %zu addresses, the first %s; want %s", host, n,
			 v[0], want);
	}
	kvc_ep_strv_free(v, n);
}

static void
test_literals(void **state)
{
	(void)state;
	one_addr("10.0.0.5", "10.0.0.5");
	one_addr("127.1", "127.0.0.1");
	one_addr("0x7f.0.0.1", "127.0.0.1");
	one_addr("0.0.0.0", "127.0.0.1");
	one_addr("::1", "[::1]");
	one_addr("[::1]", "[::1]");
	one_addr("0:0:0:0:0:0:0:1", "[::1]");
	one_addr("::", "[::1]");
	one_addr("FD00:0:0::A", "[fd00::a]");
	one_addr("::ffff:10.0.0.5", "10.0.0.5");
	one_addr("[::FFFF:a00:5]", "10.0.0.5");
}

static void
test_names(void **state)
{
	(void)state;
	/* /etc/hosts names localhost; every address it gives is loopback */
	const char *forms[] = {"localhost", "LOCALHOST", "localhost."};
	for (size_t f = 0; f < 3; f++) {
		size_t n;
		char **v = kvc_ep_addrs(forms[f], KVC_EP_RESOLVE_MS, &n);
		assert_true(n >= 1);
		bool v4 = false;
		for (size_t i = 0; i < n; i++) {
			v4 |= strcmp(v[i], "127.0.0.1") == 0;
			assert_true(strncmp(v[i], "127.", 4) == 0 ||
				    strcmp(v[i], "[::1]") == 0);
		}
		assert_true(v4);
		kvc_ep_strv_free(v, n);
	}
}

/* one_id checks that url has exactly the id want. */
static void
one_id(const char *url, const char *want)
{
	size_t n;
	char **v = kvc_ep_url_ids(url, KVC_EP_RESOLVE_MS, &n);
	if (n != 1 || strcmp(v[0], want) != 0) {
		fail_msg("%s: %zu ids, the first %s; want %s", url, n, v[0],
			 want);
	}
	kvc_ep_strv_free(v, n);
}

static void
test_urls(void **state)
{
	(void)state;
	one_id("tcp://10.0.0.5:5557", "10.0.0.5:5557");
	one_id("tcp://127.1:5557", "127.0.0.1:5557");
	one_id("tcp://[0::1]:5557", "[::1]:5557");
	one_id("tcp://eth0;10.0.0.5:5557", "10.0.0.5:5557");
	one_id("tcp://10.0.0.5:0x10", "tcp://10.0.0.5:0x10");
	one_id("tcp://10.0.0.5", "tcp://10.0.0.5");
	one_id("ipc:///run/engine.sock", "ipc:///run/engine.sock");
	char *id = kvc_ep_id("[::1]", 65535);
	assert_string_equal(id, "[::1]:65535");
	kvi_free(id);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_literals),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_urls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
