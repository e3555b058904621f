"""`eoslab app run`: a user's own exactly-once application under chaos, judged from outside.

The harness (run.py) starts or reuses a cluster, seeds the input topic with
unique values (seeder.py), runs N instances of the user's command with the
environment of contract.py (instances.py), injects app faults (faults.py)
beside the cluster's, reads the output as it appears and again in full at
the end, audits the output log's transaction markers (log_audit.py), and
judges the history with checker.kafka.app.
"""
