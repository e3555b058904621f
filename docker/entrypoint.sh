#!/bin/sh
# Entrypoint of the eoslab image: the first argument names the service.
#   broker | controller | txn-coordinator | sidecar | probe  -> python -m services.<name> "$@"
#   --help / nothing                                         -> this list
#   anything else                                            -> run as given (e.g. `sh`)
# Guarantees: the service replaces this shell (exec), so it receives the
# container's signals directly.
set -eu
case "${1:---help}" in
  broker|controller|sidecar|probe)
    svc=$1; shift; exec python -m "services.$svc" "$@" ;;
  txn-coordinator|txn_coordinator)
    shift; exec python -m services.txn_coordinator "$@" ;;
  --help|-h|help)
    echo "usage: <image> broker|controller|txn-coordinator|sidecar|probe [flags...]  (or any command)"
    exit 0 ;;
  *) exec "$@" ;;
esac
