/* rtctl cluster init | add-node: the cluster CA and node credentials
 * (rtctl_cluster.c). Runs offline; never contacts a master. */
#ifndef RTCTL_CLUSTER_H
#define RTCTL_CLUSTER_H

/* @argv[0] is the subcommand. Returns the process exit status (0 done,
 * 1 failed, 2 usage). */
int rtctl_cluster_main(int argc, char **argv);

#endif
