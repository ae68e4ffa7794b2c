/* netpolicy: which addresses webhooks may be called at, checked on the
 * address curl is about to connect to (after DNS, so a name cannot rebind to
 * a forbidden address), or, through an egress proxy, on the address the
 * proxy is told to connect to. Link-local, cloud metadata and platform
 * addresses (Azure's WireServer) and tunnels that hide their target (Teredo,
 * local-use NAT64) are always refused; HOOKFLOW_URL_DENY refuses more;
 * HOOKFLOW_URL_ALLOW, when set, allows only what it lists. An IPv6 address
 * that carries an IPv4 address (NAT64 64:ff9b::/96, 6to4 2002::/16,
 * IPv4-compatible ::a.b.c.d) is refused when either form is refused, and
 * allowed by an allow list listing either form; IPv4-mapped ::ffff:a.b.c.d
 * is checked as the IPv4 address. Pure; immutable after parsing, so shared
 * by threads. */
#ifndef HOOKFLOW_NETPOLICY_H
#define HOOKFLOW_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "base/err.h"

#define NETPOLICY_MAX_RULES 64
#define NETPOLICY_MAX_FIXED 16

struct cidr {
	int family;             /* AF_INET or AF_INET6 */
	unsigned char addr[16]; /* network address, masked */
	int bits;
};

struct netpolicy {
	struct cidr fixed[NETPOLICY_MAX_FIXED]; /* always refused */
	int nfixed;
	struct cidr allow[NETPOLICY_MAX_RULES];
	int nallow; /* 0: everything not denied is allowed */
	struct cidr deny[NETPOLICY_MAX_RULES];
	int ndeny;
};

/* Fills `p` (caller-owned) from the HOOKFLOW_URL_ALLOW and HOOKFLOW_URL_DENY
 * values `allow` and `deny` (NULL or empty: no rules), plus the addresses
 * that are always refused. */
enum err_code netpolicy_init(struct netpolicy *p, const char *allow, const char *deny,
			     struct err *e);

/* Parses a comma-separated CIDR list ("10.0.0.0/8, fd00::/8, 192.0.2.1") into
 * `out`/`n` (capacity NETPOLICY_MAX_RULES). `field` names the variable in
 * messages. An empty or NULL list gives no rules. */
enum err_code netpolicy_parse_list(const char *field, const char *list, struct cidr *out, int *n,
				   struct err *e);

/* True when `sa` (AF_INET or AF_INET6) may be connected to under `p`. Writes
 * why not into `why` (`cap` bytes, 160 hold any message) when refused. */
bool netpolicy_allowed(const struct netpolicy *p, const struct sockaddr *sa, char *why, size_t cap);

#endif
