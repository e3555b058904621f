"""The transaction coordinator service (`python -m services.txn_coordinator`)."""
