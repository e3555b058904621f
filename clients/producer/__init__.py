"""The producer: KafkaProducer over RecordAccumulator, Sender and TransactionManager."""
from clients.producer.config import ProducerConfig
from clients.producer.kafka_producer import KafkaProducer, RecordMetadata

__all__ = ["KafkaProducer", "ProducerConfig", "RecordMetadata"]
