"""The producer: KafkaProducer over RecordAccumulator, Sender and TransactionManager."""
from clients.producer.config import ProducerConfig
from clients.producer.kafka_producer import KafkaProducer, RecordMetadata
from clients.producer.transactions import ConsumerGroupMetadata

__all__ = ["ConsumerGroupMetadata", "KafkaProducer", "ProducerConfig", "RecordMetadata"]
