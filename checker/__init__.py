"""The history checker: reads a recorded history and proves what went wrong.

It never talks to a cluster. Readers (checker.history and checker.formats)
turn JSONL, Jepsen EDN and Jepsen log lines into `Op`s; the linearizability
search (checker.linear) and the Kafka analyses (checker.kafka) judge them.
"""
