"""eoslab: a lab for Kafka's exactly-once machinery."""
__version__ = "0.1.0"
