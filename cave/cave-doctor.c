/* cave-doctor: what this machine's kernel offers to contain tools, and
 * what cave-sandbox's required mode will do here (`cave doctor`). It only
 * probes and reports; it never changes the system or relaxes a policy.
 * Exit 0 when required mode can run tools, 1 when it will refuse them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "event.h"
#include "msg.h"
#include "paths.h"
#include "sandbox.h"

static _Noreturn void usage(int code)
{
	fprintf(code ? stderr : stdout,
		"usage: cave doctor [--json]\n"
		"Reports the kernel's containment features (Landlock, namespaces,\n"
		"seccomp), what required sandbox mode does on this machine, and\n"
		"whether network: true tools can be served (slirp4netns, /dev/net/tun).\n");
	exit(code);
}

static const char *yes(bool b)
{
	return b ? "yes" : "no";
}

int main(int argc, char **argv)
{
	struct cave_kernel k;
	struct cave_net net;
	struct cave_policy *pol = cave_xcalloc(1, sizeof *pol);
	struct cave_fs_view *view = cave_xcalloc(1, sizeof *view);
	char ppath[4096] = "", fpath[4096] = "";
	const char *perr = NULL;
	bool json = false, ok, net_ok;
	cave_err e;
	int rc;

	cave_set_prog(argv[0]);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			usage(0);
		else
			usage(CAVE_EX_USAGE);
	}
	cave_kernel_probe(&k);
	cave_net_probe(&net, "slirp4netns");
	if (cave_data_path("sandbox/default.policy", ppath, sizeof ppath) != 0 ||
	    cave_data_path("sandbox/fs.policy", fpath, sizeof fpath) != 0)
		perr = "cannot find the sandbox policies (sandbox/default.policy, sandbox/fs.policy)";
	else if (cave_policy_load(pol, ppath, &e) != 0 ||
		 cave_fs_view_load(view, fpath, &e) != 0 ||
		 (k.seccomp && cave_policy_compile(pol, k.seccomp_notify, &e) != 0))
		perr = e.msg;
	ok = !k.missing[0] && !perr;
	net_ok = ok && !net.missing[0];
	if (json) {
		jv o = jv_object(), ll = jv_object(), nw = jv_object();

		o = jv_object_set(o, jv_string("kernel"), jv_string(k.release));
		ll = jv_object_set(ll, jv_string("abi"), jv_number(k.landlock_abi));
		ll = jv_object_set(ll, jv_string("tcp"), jv_bool(k.landlock_abi >= 4));
		ll = jv_object_set(ll, jv_string("scopes"), jv_bool(k.landlock_abi >= 6));
		o = jv_object_set(o, jv_string("landlock"), ll);
		o = jv_object_set(o, jv_string("user_namespaces"), jv_bool(k.userns));
		o = jv_object_set(o, jv_string("seccomp"), jv_bool(k.seccomp));
		o = jv_object_set(o, jv_string("seccomp_notify"), jv_bool(k.seccomp_notify));
		o = jv_object_set(o, jv_string("policy"),
				  perr ? jv_null() : jv_string(pol->name));
		o = jv_object_set(o, jv_string("policy_rules"), jv_number((double)pol->n));
		o = jv_object_set(o, jv_string("policy_error"),
				  perr ? jv_string(perr) : jv_null());
		o = jv_object_set(o, jv_string("required_mode"),
				  jv_string(ok ? "available" : "refuses"));
		o = jv_object_set(o, jv_string("missing"),
				  k.missing[0] ? jv_string(k.missing) : jv_null());
		nw = jv_object_set(nw, jv_string("available"), jv_bool(net_ok));
		nw = jv_object_set(nw, jv_string("slirp4netns"),
				   net.slirp[0] ? jv_string(net.slirp) : jv_null());
		nw = jv_object_set(nw, jv_string("tun"), jv_bool(net.tun));
		nw = jv_object_set(nw, jv_string("missing"),
				   net.missing[0] ? jv_string(net.missing) : jv_null());
		o = jv_object_set(o, jv_string("network"), nw);
		o = jv_dump_string(o, 0);
		printf("%s\n", jv_string_value(o));
		jv_free(o);
	} else {
		printf("kernel             %s\n", k.release);
		if (k.landlock_abi > 0)
			printf("landlock           ABI %d (files%s%s%s)\n", k.landlock_abi,
			       k.landlock_abi >= 3 ? ", truncate" : "",
			       k.landlock_abi >= 4 ? ", TCP bind/connect" : "",
			       k.landlock_abi >= 6 ? ", signal and abstract socket scopes" : "");
		else
			printf("landlock           no\n");
		printf("user namespaces    %s (user, mount, PID, IPC, UTS, network, cgroup)\n",
		       yes(k.userns));
		printf("seccomp            %s (user notification: %s%s)\n", yes(k.seccomp),
		       yes(k.seccomp_notify),
		       k.seccomp_notify ? ", results name the rule that fired" : "");
		printf("running as         uid %u%s\n", (unsigned)geteuid(),
		       geteuid() == 0 ? " (a pids cgroup bounds fork bombs)" : "");
		if (perr)
			printf("policy             error: %s\n", perr);
		else
			printf("policy             %s: %zu rules; %s: %zu paths\n",
			       ppath, pol->n, fpath, view->n);
		if (ok)
			printf("required mode      available: each tool runs in its own "
			       "namespaces with no network, Landlock (workspace and system "
			       "directories), seccomp, rlimits and a pids cgroup\n");
		else
			printf("required mode      refuses every tool: missing %s\n",
			       perr ? perr : k.missing);
		if (net_ok)
			printf("network: true      served: %s over /dev/net/tun gives the tool "
			       "its own network (10.0.2.100), never the host's loopback\n",
			       net.slirp);
		else if (net.missing[0])
			printf("network: true      refused in required mode: missing %s\n",
			       net.missing);
		else
			printf("network: true      refused, as every tool in required mode\n");
		printf("host mode          no containment; only on explicit opt-in\n");
	}
	rc = ok ? 0 : CAVE_EX_NO;
	cave_policy_free(pol);
	cave_fs_view_free(view);
	free(pol);
	free(view);
	if (cave_close_stdout() != 0)
		rc = CAVE_EX_IO;
	return rc;
}
