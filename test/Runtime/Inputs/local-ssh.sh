#!/bin/sh
# An ssh stand-in for mpirun's rsh launcher (--mca plm_rsh_agent): it
# drops ssh's options and the host name and runs the remote command (the
# node's Open MPI daemon) on this machine, so that a hostfile with two
# node names makes two nodes of one machine. Open MPI itself merges every
# name of this machine (localhost, 127.0.0.1, the host name) into one node.
# Each daemon gets a session directory of its own, as on a real node: two
# daemons of one host name would otherwise race to create the same one.
while [ $# -gt 0 ]; do
  case "$1" in
  -*) shift ;;
  *) break ;;
  esac
done
host="$1"
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/local-ssh.$host.XXXXXX") || exit 1
OMPI_MCA_orte_tmpdir_base="$dir" sh -c "$*"
status=$?
rm -rf "$dir"
exit $status
