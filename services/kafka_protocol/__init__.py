"""Kafka's binary protocol on the brokers and transaction coordinators, so real Kafka clients
(librdkafka, kafka-python, aiokafka, the Java client) can use the lab. gRPC stays the contract
between the lab's services; this package translates each Kafka request into the same in-process
handlers the gRPC servicers call."""
