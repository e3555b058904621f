#!/bin/sh
# Entrypoint of the eoslab image: the first argument names the service.
#   broker | controller | txn-coordinator               -> services.<name> through eoslab-launch
#   sidecar | probe                                     -> python -m services.<name> "$@"
#   --help / nothing                                         -> this list
#   anything else                                            -> run as given (e.g. `sh`)
# Guarantees: the service replaces this shell (exec), so it receives the
# container's signals directly; eoslab-launch imports the service, waits for
# ZooKeeper ($EOSLAB_WAIT_ZK) and runs it in the same process. $EOSLAB_EXTRA_ARGS (flags without spaces,
# e.g. "--producer-state-batches=5 --transaction-verification") is appended
# to the service's own flags, split on spaces, never glob-expanded.
set -euf
extra=${EOSLAB_EXTRA_ARGS:-}
case "${1:---help}" in
  broker|controller)
    svc=$1; shift
    # shellcheck disable=SC2086  # word splitting of $extra is the point
    exec python /usr/local/bin/eoslab-launch "services.$svc" "$@" $extra ;;
  txn-coordinator|txn_coordinator)
    shift
    # shellcheck disable=SC2086
    exec python /usr/local/bin/eoslab-launch services.txn_coordinator "$@" $extra ;;
  sidecar|probe)
    svc=$1; shift
    # shellcheck disable=SC2086
    exec python -m "services.$svc" "$@" $extra ;;
  --help|-h|help)
    echo "usage: <image> broker|controller|txn-coordinator|sidecar|probe [flags...]  (or any command)"
    exit 0 ;;
  *) exec "$@" ;;
esac
