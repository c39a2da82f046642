#!/bin/sh
# An ssh stand-in for mpirun's rsh launcher (--mca plm_rsh_agent): it
# drops ssh's options and the host name and runs the remote command (the
# node's Open MPI daemon) on this machine, so that a hostfile with two
# node names makes two nodes of one machine. Open MPI itself merges every
# name of this machine (localhost, 127.0.0.1, the host name) into one node.
while [ $# -gt 0 ]; do
  case "$1" in
  -*) shift ;;
  *) break ;;
  esac
done
shift # the host name
exec sh -c "$*"
