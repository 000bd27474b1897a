#!/usr/bin/env bash
# A stand-in for ssh that Open MPI's launcher uses (`--mca plm_rsh_agent <this file>`) when the
# "hosts" are Linux network namespaces on this machine (made by scripts/ci/netns-hosts.sh).
#
#   netns-rsh-agent.sh [ssh-style options] HOST COMMAND...
#
# Runs COMMAND (joined by spaces and given to sh, as sshd does) inside the network namespace
# "$MPITRON_NETNS_PREFIX$HOST", in private UTS and mount namespaces where the host name is HOST
# (Open MPI names its session directory after it) and /etc/hosts is $MPITRON_NETNS_HOSTS. The
# environment is cleared like an ssh login's: Open MPI passes its own settings on the command line.
set -euo pipefail
: "${MPITRON_NETNS_PREFIX:?}" "${MPITRON_NETNS_HOSTS:?}"

while [[ $# -gt 0 && $1 == -* ]]; do shift; done
(($# >= 2)) || { echo "usage: $0 [options] HOST COMMAND..." >&2; exit 255; }
host=$1
shift

# shellcheck disable=SC2016  # $0/$1 are expanded by the inner shell
exec ip netns exec "$MPITRON_NETNS_PREFIX$host" unshare --uts --mount \
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="${HOME:-/root}" \
  LANG=C.UTF-8 MPITRON_NETNS_PREFIX="$MPITRON_NETNS_PREFIX" MPITRON_NETNS_HOSTS="$MPITRON_NETNS_HOSTS" \
  sh -c 'hostname "$0" && mount --bind "$MPITRON_NETNS_HOSTS" /etc/hosts && exec sh -c "$1"' \
  "$host" "$*"
