/*
 * test_replica_url.c - where a follower sends writes (replica.h's
 * kvc_replica_url): --advertise-url first, then $POD_IP, then the --http
 * host unless it binds every address, then the identity.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "replica.h"

static void
url_is(const char *http, const char *advertise, int port, const char *want)
{
	kvc_replica_flags f = {.http = http, .advertise = advertise};
	char url[256];
	kvc_replica_url(&f, port, "coord-7", url, sizeof(url));
	assert_string_equal(url, want);
}

static void
test_urls(void **state)
{
	(void)state;
	unsetenv("POD_IP");
	url_is("10.0.0.5:8080", NULL, 8080, "http://10.0.0.5:8080");
	url_is("10.0.0.5:8080", "https://lb:443", 8080, "https://lb:443");
	url_is("10.0.0.5:0", NULL, 0, "");
	/* an address that binds every one is no address to send to */
	url_is("0.0.0.0:8080", NULL, 8080, "http://coord-7:8080");
	url_is("[::]:8080", NULL, 8080, "http://coord-7:8080");
	url_is(":::8080", NULL, 8080, "http://coord-7:8080");
	url_is("*:8080", NULL, 8080, "http://coord-7:8080");
	url_is(":8080", NULL, 8080, "http://coord-7:8080");
	setenv("POD_IP", "10.1.2.3", 1);
	url_is("0.0.0.0:8080", NULL, 8080, "http://10.1.2.3:8080");
	unsetenv("POD_IP");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_urls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
