"""Kafka-like clients: an idempotent producer (RecordAccumulator, Sender, TransactionManager) and a consumer."""
